r"""Hare workloads: data-parallel training jobs of the seed's eight models on a heterogeneous
cluster (docs/workloads.md, section "Hare").

A job j trains one of the eight models of Hare's evaluation (VGG19, ResNet-50, Inception-v3,
BERT-base, Transformer, DeepSpeech, FastGCN, GraphSAGE) in R_j rounds (fixed-size blocks of
iterations); each round has m_j data-parallel tasks (one per worker), m_j in {1, 2, 4, 8}; a
task on a GPU of type k takes p[j,k] seconds.  Draws, each from its own random stream of the
seed (so changing one distribution leaves the others' draws alone):

* model: uniform over the eight (:data:`HARE_MODELS`);
* m_j: uniform over {1, 2, 4, 8} (:data:`TASKS_PER_ROUND_MIX`);
* R_j: uniform integer in [``min_rounds``, ``max_rounds``] (default 2..10);
* the task's V100 seconds tau_j: log-uniform in [``min_task_s``, ``max_task_s``] (default
  10..60 s; one round is a block of iterations whose size the job chooses);
* weight w_j: uniform integer in 1..5 (:data:`WEIGHT_RANGE`);
* arrival: all at 0 (``arrivals="batch"``, the seed's offline setting) or a Poisson process of
  ``jobs_per_hour`` (exponential gaps, the first job at 0).

**Task seconds per type.**  p[j,k] = tau_j x S_v100 / S_k, with S_k the single-GPU throughput
of the model's *speed source* in Gavel's measured table (:mod:`~schedlab.workloads.
throughputs`, scale factor 1): ResNet-50 and the Transformer are in that table (batch size
64) and use their own rows; the others borrow the row of the nearest measured family
(:data:`SPEED_SOURCE`): VGG19 and Inception-v3 -> ResNet-50 (convolutional image
classifiers), BERT-base -> Transformer (attention encoders), DeepSpeech -> LM (batch size 20)
(recurrent: Gavel's LM is an LSTM), FastGCN and GraphSAGE -> Recommendation (batch size 1024)
(sparse feature gathers, memory-bound; Gavel measured that row fastest on the P100).  Only
K80, P100 and V100 are supported: we have no measured speeds for T4 or A100 to cite, and a
cluster with another type is rejected.

**Cluster.**  :data:`HARE_CLUSTER`: 160 GPUs, 64 K80 + 48 P100 + 48 V100 (the seed's 160-GPU
simulation does not give its mix; older GPUs are the most numerous in a lab fleet: our
choice).

**Switch costs.**  Each job carries its model's parameter memory ``model_memory_gb`` and
``switch_seconds`` {type: sigma[j,k]} from the chosen switch model of
:mod:`schedlab.world.hare_switching` (default ``"hare"``: resident models, milliseconds;
``"pipelined"``; ``"default"``: cold restarts, seconds; ``None``: no switch costs).

**Size.**  With the defaults a job needs on average 6 x 3.75 x 27.9 s ~ 630 V100-seconds of
work (seed 0: 644 / 623 / 607 at 100 / 200 / 300 jobs); the default cluster is worth about
140 V100s (each type counted at the jobs' mean speed relative to a V100), so the whole work
of 100 / 200 / 300 jobs fills it for about 8 / 15 / 22 minutes, and the longest job alone
(rounds x its fastest task) takes at most 10 x 60 s = 10 minutes: most jobs finish within
tens of minutes, as in the seed (90.5% within 25 minutes under Hare).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from schedlab.atomic import write_bytes_atomic
from schedlab.errors import InputError
from schedlab.instance import INSTANCE_SCHEMA, MAX_JOBS, Instance, instance_from_dict
from schedlab.workloads.precision import stated
from schedlab.workloads.throughputs import load_gavel_throughputs
from schedlab.world.hare_switching import (
    GPU_MEMORY_GB,
    MODEL_MEMORY_GB,
    SwitchKind,
    switch_model,
    switch_seconds_for,
)

log = logging.getLogger(__name__)

#: The eight models of Hare's evaluation (the seed's Table 1).
HARE_MODELS: tuple[str, ...] = (
    "VGG19", "ResNet-50", "Inception-v3", "BERT-base", "Transformer", "DeepSpeech", "FastGCN",
    "GraphSAGE",
)
#: Model -> the Gavel job type whose single-GPU throughputs give its relative speeds.
SPEED_SOURCE: Mapping[str, str] = {
    "VGG19": "ResNet-50 (batch size 64)",
    "ResNet-50": "ResNet-50 (batch size 64)",
    "Inception-v3": "ResNet-50 (batch size 64)",
    "BERT-base": "Transformer (batch size 64)",
    "Transformer": "Transformer (batch size 64)",
    "DeepSpeech": "LM (batch size 20)",
    "FastGCN": "Recommendation (batch size 1024)",
    "GraphSAGE": "Recommendation (batch size 1024)",
}
#: The default heterogeneous cluster: 160 GPUs.
HARE_CLUSTER: Mapping[str, int] = {"k80": 64, "p100": 48, "v100": 48}
#: P(m_j): data-parallel tasks per round.
TASKS_PER_ROUND_MIX: Mapping[int, float] = {1: 0.25, 2: 0.25, 4: 0.25, 8: 0.25}
#: Weights: uniform integers in this closed range.
WEIGHT_RANGE: tuple[int, int] = (1, 5)
DEFAULT_ROUNDS: tuple[int, int] = (2, 10)
DEFAULT_TASK_S: tuple[float, float] = (10.0, 60.0)
DEFAULT_JOBS_PER_HOUR = 60.0
REFERENCE_TYPE = "v100"

_STREAMS = ("model", "tasks", "rounds", "seconds", "weight", "arrival")


def _streams(seed: int) -> dict[str, np.random.Generator]:
    children = np.random.SeedSequence(seed).spawn(len(_STREAMS))
    return {name: np.random.default_rng(child)
            for name, child in zip(_STREAMS, children, strict=True)}


def relative_speeds(model: str) -> dict[str, float]:
    """{type: S_v100 / S_k}: a task's seconds on type k per second on a V100 (1.0 on V100)."""
    if model not in SPEED_SOURCE:
        raise InputError(f"unknown Hare model {model!r} (known: {', '.join(HARE_MODELS)})",
                         field="model")
    row = load_gavel_throughputs().throughput(SPEED_SOURCE[model], 1)
    return {k: row[REFERENCE_TYPE] / v for k, v in row.items() if v > 0}


def task_seconds(model: str, v100_seconds: float, types: Sequence[str]) -> dict[str, float]:
    """p[j,k] = tau_j x S_v100 / S_k for each of ``types`` (stated to 12 digits)."""
    ratio = relative_speeds(model)
    missing = [k for k in types if k not in ratio]
    if missing:
        raise InputError(f"no measured speed of {model!r} on {', '.join(missing)} (Hare "
                         f"workloads know {', '.join(sorted(ratio))})", field="cluster")
    return {k: stated(v100_seconds * ratio[k]) for k in types}


def _check_range(low: float, high: float, name: str) -> None:
    if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
        raise InputError(f"{name} needs 0 < low <= high, got ({low}, {high})", field=name)


def generate_hare_instance(
    num_jobs: int = 200,
    *,
    seed: int = 0,
    cluster: Mapping[str, int] | None = None,
    arrivals: Literal["batch", "poisson"] = "batch",
    jobs_per_hour: float = DEFAULT_JOBS_PER_HOUR,
    rounds: tuple[int, int] = DEFAULT_ROUNDS,
    task_s: tuple[float, float] = DEFAULT_TASK_S,
    tasks_per_round: Mapping[int, float] = TASKS_PER_ROUND_MIX,
    switch: SwitchKind | None = "hare",
    name: str | None = None,
    description: str | None = None,
) -> Instance:
    """A Hare workload of ``num_jobs`` jobs (module docstring) on ``cluster`` ({type: count},
    default :data:`HARE_CLUSTER`).

    Raises :class:`~schedlab.errors.InputError` for impossible arguments (no jobs, an empty
    range, a GPU type without measured speeds, a bad arrival kind or rate, ...).
    """
    if not 1 <= num_jobs <= MAX_JOBS:
        raise InputError(f"the workload needs 1 to {MAX_JOBS} jobs, got {num_jobs}",
                         field="num_jobs")
    pools = dict(HARE_CLUSTER if cluster is None else cluster)
    if not pools or any(c < 0 for c in pools.values()) or sum(pools.values()) == 0:
        raise InputError("the cluster needs GPU counts >= 0 and at least one GPU",
                         field="cluster")
    types = [k for k, c in pools.items() if c > 0]
    if arrivals not in ("batch", "poisson"):
        raise InputError(f"arrivals must be 'batch' or 'poisson', got {arrivals!r}",
                         field="arrivals")
    if arrivals == "poisson" and not (math.isfinite(jobs_per_hour) and jobs_per_hour > 0):
        raise InputError("jobs_per_hour must be a positive number", field="jobs_per_hour")
    if not (isinstance(rounds[0], int) and isinstance(rounds[1], int)):
        raise InputError("rounds must be a pair of integers", field="rounds")
    _check_range(rounds[0], rounds[1], "rounds")
    _check_range(task_s[0], task_s[1], "task_s")
    if not tasks_per_round or any(m < 1 or p < 0 for m, p in tasks_per_round.items()) \
            or sum(tasks_per_round.values()) <= 0:
        raise InputError("tasks_per_round needs positive task counts with probabilities >= 0",
                         field="tasks_per_round")
    sigma_model = None if switch is None else switch_model(switch)

    rng = _streams(seed)
    models = [HARE_MODELS[int(i)] for i in rng["model"].integers(len(HARE_MODELS),
                                                                 size=num_jobs)]
    counts = list(tasks_per_round)
    p = np.asarray([tasks_per_round[m] for m in counts], dtype=float)
    tasks = [counts[int(i)] for i in rng["tasks"].choice(len(counts), size=num_jobs,
                                                         p=p / p.sum())]
    round_counts = rng["rounds"].integers(rounds[0], rounds[1] + 1, size=num_jobs)
    tau = np.exp(rng["seconds"].uniform(math.log(task_s[0]), math.log(task_s[1]),
                                        size=num_jobs))
    weights = rng["weight"].integers(WEIGHT_RANGE[0], WEIGHT_RANGE[1] + 1, size=num_jobs)
    if arrivals == "batch":
        times = [0.0] * num_jobs
    else:
        gaps = rng["arrival"].exponential(3600.0 / jobs_per_hour, size=num_jobs)
        gaps[0] = 0.0
        times = [stated(float(t)) for t in np.cumsum(gaps)]

    jobs: list[dict[str, Any]] = []
    for i in range(num_jobs):
        model = models[i]
        job: dict[str, Any] = {
            "id": f"{model}-{i}",
            "job_type": model,
            "arrival": times[i],
            "weight": float(weights[i]),
            "rounds": int(round_counts[i]),
            "tasks_per_round": tasks[i],
            "task_seconds": task_seconds(model, float(tau[i]), types),
            "model_memory_gb": stated(MODEL_MEMORY_GB[model]),
        }
        if sigma_model is not None:
            job["switch_seconds"] = {
                k: stated(v) for k, v in switch_seconds_for(
                    sigma_model, model, MODEL_MEMORY_GB[model], types, GPU_MEMORY_GB).items()}
        jobs.append(job)

    label = name or f"hare-{num_jobs}jobs-{sum(pools.values())}gpus-{arrivals}-seed{seed}"
    mix = ", ".join(f"{c} {k.upper()}" for k, c in pools.items())
    document = {
        "schema": INSTANCE_SCHEMA,
        "name": label,
        "description": description or (
            f"{num_jobs} Hare jobs from schedlab.workloads.hare.generate_hare_instance("
            f"{num_jobs}, seed={seed}, arrivals={arrivals!r}, switch={switch!r}) on {mix}: "
            "the seed's eight models, rounds of 1/2/4/8 tasks, task seconds from Gavel's "
            "measured throughputs (docs/workloads.md, Hare)."),
        "cluster": {"accelerators": {k: {"count": int(c)} for k, c in pools.items()}},
        "jobs": jobs,
    }
    return instance_from_dict(document, source=label)


# -------------------------------------------------------------------------------- examples

#: Seed of the small example (6 jobs on 4 GPUs).
SMALL_SEED = 1
SMALL_CLUSTER: Mapping[str, int] = {"k80": 2, "p100": 1, "v100": 1}


def example_instances() -> dict[str, Instance]:
    """The example instances of ``instances/hare/``, by file name."""
    small = generate_hare_instance(
        6, seed=SMALL_SEED, cluster=SMALL_CLUSTER, rounds=(1, 3),
        tasks_per_round={1: 1 / 3, 2: 1 / 3, 4: 1 / 3},
        name="small-6jobs-4gpus",
        description=(
            "Six Hare jobs on 2 K80 + 1 P100 + 1 V100 for quick runs (small enough for "
            "hare.exact: at most 3 rounds of at most 4 tasks): generate_hare_instance(6, "
            "seed=1, cluster={'k80': 2, 'p100': 1, 'v100': 1}, rounds=(1, 3), "
            "tasks_per_round={1, 2, 4 equally likely}), Hare-style switch costs."),
    )
    return {"small-6jobs-4gpus.json": small}


#: Job fields written first, in this order, by :func:`save_hare_instance`.
_JOB_KEYS = ("id", "job_type", "arrival", "weight", "rounds", "tasks_per_round")


def save_hare_instance(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` without default-valued fields, one job per line, atomically."""
    from schedlab.workloads.gavel import compact_instance_dict

    data = compact_instance_dict(instance, job_keys=_JOB_KEYS)
    head = {k: v for k, v in data.items() if k != "jobs"}
    lines = ["{"]
    lines += [f" {json.dumps(k)}: {json.dumps(v, allow_nan=False)}," for k, v in head.items()]
    jobs = [json.dumps(job, allow_nan=False, separators=(",", ":")) for job in data["jobs"]]
    lines.append(' "jobs": [')
    lines += [f"  {job}," for job in jobs[:-1]] + [f"  {jobs[-1]}", " ]", "}"]
    write_bytes_atomic(Path(path), ("\n".join(lines) + "\n").encode("utf-8"))


def write_example_instances(folder: str | Path) -> list[Path]:
    """(Re)write ``instances/hare/`` into ``folder``; return the paths written."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, instance in example_instances().items():
        target = out / file_name
        save_hare_instance(instance, target)
        written.append(target)
        log.info("wrote %s", target)
    return written
