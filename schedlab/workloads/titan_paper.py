r"""Titan's evaluation workload exactly as its code builds it: the ``paper`` preset.

TitanSched (github.com/gaow0007/TitanSched at f71cf44, MIT) evaluates on twelve recorded
traces, ``trace/main.zip``: ``FM-<density>-<model>/workload-0.csv`` for the densities 1, 1.5
and 2 and the models ``vit``, ``vit-large``, ``roberta-base`` and ``roberta-large`` (made by
``trace/all_trace_generation.sh``).  They are shipped unchanged in ``schedlab/data/titan/``
with the code's licence; each row is one fine-tuning task: ``name``, ``submission_time`` (s),
``application`` (``model@dataset``), ``num_gpus``, ``target_batch_size``, ``target_lr``,
``target_gradient_steps`` and ``target_metric``.

**A task's work**, as ``FoundationModelJob.__init__`` computes it
(``client/job/foundation_model.py`` lines 32-40), in samples:

.. math::

    W = \text{samples per epoch}(\text{dataset}) \times E,\qquad
    E = \min\{e_k : \text{target} \le m_k\}\ \text{else}\ 10,

over the fine-tuning trajectory (epochs e_k, metric m_k) of (model, dataset, lr, gradient
steps) in the code's ``common/cache/hpo_task_info.npy``
(``FoundationModelApplication.get_completion_epoch``, ``client/application/
foundation_model.py`` lines 224-258; samples per epoch: its ``TaskScale``, lines 160-193;
10 = its ``max_epochs``).  The trajectories are shipped as ``hpo_trajectories.json.gz``
(converted by ``scripts/convert_titan_hpo.py``).

**The target as the code reads it.**  ``main.py`` (line 40) reads the trace with pandas 1.x
``read_csv``, whose default float parser (``precise_xstrtod``) is not correctly rounded: it
reads ``0.9071803852889667`` as ``0.9071803852889668``.  The traces set many targets to the
best metric of their trajectory, so one unit in the last place decides whether the target is
reached: 196 of the 2 970 tasks (RoBERTa MRPC and QNLI) then train the full 10 epochs.
:func:`read_like_pandas1` is that parser (checked equal to pandas 1.5.3 on all 2 970
targets); ``targets="code"`` (the default) reads targets with it and reproduces the code's
``max_progress`` of every task of its published result files; ``targets="exact"`` reads
them correctly rounded.

**Speed, GPUs, cluster.**  Samples/s at batch B on a GPUs from the code's V100 speed model
(:data:`schedlab.workloads.titan.THROUGHPUT`, B = ``target_batch_size``: 48 or 16 times the
gradient steps); ``max_gpus`` = min(32, B // smallest local batch) as the code (no request
of the twelve traces exceeds it; a request above it would be cut to it).  The cluster is
``run/exp_cluster/fast_batch_run.sh``'s (lines 20-21; one switch, ``options.py`` line 18): 8
nodes of 4 V100s (32 GPUs), and the round is Titan's 120 s (``scheduling_time_interval``,
line 46; SRTF and Tiresias run at 300 s there, line 29, :data:`BASELINE_ROUND_S`).

**Labels.**  The merge rule of :mod:`schedlab.formulations.titan.merge` compares tasks by
the class labels of their datasets.  Datasets whose labels are in the shipped concept
hierarchy get them (:data:`LABEL_SETS`); MNIST, the ImageNet splits and the GLUE tasks have
none there (digit names, split membership unknown, "entailment"), so the similarity rule
never merges them.  (The code's merger compares no labels: ``alg/scheduler/titan_mtask.py``
pairs any two never-started tasks of different datasets whose benefit passes.)
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from schedlab.errors import InputError
from schedlab.instance import INSTANCE_SCHEMA, Instance, instance_from_dict
from schedlab.workloads.precision import stated
from schedlab.workloads.titan import (
    GPUS_PER_NODE,
    TITAN_ROUND_S,
    label_set_classes,
    max_gpus,
    throughput,
)

#: Trace models of the code and their names here.
TRACE_MODELS: Mapping[str, str] = {
    "vit": "vit-base", "vit-large": "vit-large", "roberta-base": "roberta-base",
    "roberta-large": "roberta-large",
}
#: The code's trace densities, as they appear in the trace names.
PAPER_DENSITIES: Mapping[float, str] = {1.0: "1", 1.5: "1.5", 2.0: "2"}
#: Nodes and GPUs per node of the evaluation cluster (``fast_batch_run.sh`` lines 20-21:
#: ``num_node_p_switch=8``, ``num_gpu_p_node=4``; one switch, ``options.py`` line 18).
PAPER_NODES = 8
#: Scheduling interval of SRTF and Tiresias in the same script, s.
BASELINE_ROUND_S = 300.0
#: Checkpoint overhead of a (re)start in the code's simulation (``--add_ckpt=30``), s.
ADD_CKPT_S = 30.0
#: The code's ``max_epochs``: a target never reached trains this many epochs.
MAX_EPOCHS = 10.0
#: Training samples per epoch of each dataset (the code's ``TaskScale``).
SAMPLES_PER_EPOCH: Mapping[str, int] = {
    "wnli": 159, "rte": 623, "mrpc": 917, "stsb": 1438, "sst2": 16838, "qnli": 26186,
    "qqp": 90962, "mnli": 98176, "snli": 137344, "ag_news": 30000, "wikitext-103": 59061,
    "Bingsu#Cat_and_Dog": 8000, "frgfm#imagenette": 9469,
    "Bingsu#Human_Action_Recognition": 12600, "cifar100": 50000, "fashion_mnist": 60000,
    "mnist": 60000, "food101": 75750, "imagenet-split-0": 25000, "imagenet-split-1": 75000,
    "imagenet-split-2": 100000,
}
#: The hierarchy's label set of a trace dataset (datasets absent have none, module docstring).
LABEL_SETS: Mapping[str, str] = {
    "Bingsu#Cat_and_Dog": "cat_vs_dog", "frgfm#imagenette": "imagenette",
    "cifar100": "cifar100", "fashion_mnist": "fashion_mnist", "food101": "food101",
}

TargetReader = Literal["code", "exact"]
_COLUMNS = ("name", "submission_time", "application", "num_gpus", "target_batch_size",
            "target_lr", "target_gradient_steps", "target_metric")


def metric_key(dataset: str) -> str:
    """The metric the code reads for ``dataset`` (``standarized_metric``,
    ``common/applications.py`` lines 266-277; ``dataset in 'stsb'`` there is a substring
    test, which no trace dataset but STS-B passes)."""
    if dataset in ("mrpc", "qqp"):
        return "eval_f1"
    if dataset in "stsb":
        return "eval_pearson"
    if "wiki" in dataset:
        return "eval_loss"
    return "eval_accuracy"


def read_like_pandas1(text: str) -> float:
    """``text`` parsed as pandas 1.x ``read_csv`` does by default (its C function
    ``precise_xstrtod``): at most 17 significant digits accumulated as ``n = 10 n + d`` in
    double precision (leading zeros count), further integer digits raise the exponent and
    further decimals are dropped, then one multiplication or division by the double nearest
    ``10^|exponent|``.  Not correctly rounded: ``"0.9071803852889667"`` gives the double
    printed ``0.9071803852889668``."""
    s = text.strip()
    negative = s.startswith("-")
    if s[:1] in ("+", "-"):
        s = s[1:]
    number, exponent, digits, decimals, i = 0.0, 0, 0, 0, 0
    while i < len(s) and s[i].isdigit():
        if digits < 17:
            number = number * 10.0 + (ord(s[i]) - 48)
            digits += 1
        else:
            exponent += 1
        i += 1
    if i < len(s) and s[i] == ".":
        i += 1
        while digits < 17 and i < len(s) and s[i].isdigit():
            number = number * 10.0 + (ord(s[i]) - 48)
            digits += 1
            decimals += 1
            i += 1
        while i < len(s) and s[i].isdigit():
            i += 1
        exponent -= decimals
    if i < len(s) and s[i] in "eE":
        i += 1
        sign = -1 if i < len(s) and s[i] == "-" else 1
        if i < len(s) and s[i] in "+-":
            i += 1
        start = i
        while i < len(s) and s[i].isdigit():
            i += 1
        if i == start:
            raise ValueError(f"not a number: {text!r}")
        exponent += sign * int(s[start:i])
    if i != len(s) or digits == 0:
        raise ValueError(f"not a number: {text!r}")
    if exponent > 308:
        number = math.inf if number else 0.0
    elif exponent > 0:
        number *= float(f"1e{exponent}")
    elif exponent < -308:
        number = 0.0
    elif exponent < 0:
        number /= float(f"1e{-exponent}")
    return -number if negative else number


@dataclass(frozen=True)
class TraceTask:
    """One row of a code trace, typed; ``target_text`` is the target as written."""

    name: str
    submission_time: float
    model: str  # the code's model name (vit, vit-large, roberta-base, roberta-large)
    dataset: str
    num_gpus: int
    target_batch_size: int
    target_lr: str
    target_gradient_steps: int
    target_text: str


def trace_name(density: float, model: str) -> str:
    """``FM-<density>-<model>`` (an InputError naming the field for unknown values)."""
    if model not in TRACE_MODELS:
        raise InputError(f"unknown trace model {model!r} (known: {', '.join(TRACE_MODELS)})",
                         field="model")
    key = PAPER_DENSITIES.get(float(density)) if math.isfinite(density) else None
    if key is None:
        raise InputError(f"the code's traces have densities 1, 1.5 and 2, not {density!r}",
                         field="density")
    return f"FM-{key}-{model}"


def _data_text(file_name: str) -> bytes:
    return resources.files("schedlab").joinpath("data", "titan", file_name).read_bytes()


def read_trace(density: float = 1.0, model: str = "vit") -> list[TraceTask]:
    """The tasks of trace ``FM-<density>-<model>``, in file order."""
    name = trace_name(density, model)
    text = _data_text(f"{name}.csv").decode("utf-8")
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != _COLUMNS:
        raise InputError(f"unexpected columns {reader.fieldnames}", file=f"{name}.csv")
    tasks = []
    for row in reader:
        trace_model, _, dataset = row["application"].partition("@")
        tasks.append(TraceTask(
            name=row["name"], submission_time=float(row["submission_time"]),
            model=trace_model, dataset=dataset, num_gpus=int(row["num_gpus"]),
            target_batch_size=int(row["target_batch_size"]), target_lr=row["target_lr"],
            target_gradient_steps=int(row["target_gradient_steps"]),
            target_text=row["target_metric"]))
    return tasks


@lru_cache(maxsize=1)
def trajectories() -> dict[str, Any]:
    """{model: {dataset: {lr: {steps: {"metric", "values", "epochs"}}}}} of the code's
    fine-tuning cache (module docstring)."""
    data: dict[str, Any] = json.loads(gzip.decompress(_data_text("hpo_trajectories.json.gz")))
    return data


def completion_epochs(model: str, dataset: str, lr: str, gradient_steps: int,
                      target: float) -> float:
    """E: the first epoch whose metric reaches ``target``, else :data:`MAX_EPOCHS`
    (``get_completion_epoch``; the smallest such epoch, as the code's ``min``)."""
    try:
        trajectory = trajectories()[model][dataset][lr][str(gradient_steps)]
    except KeyError:
        raise InputError(f"no fine-tuning trajectory for {model}@{dataset} at lr {lr}, "
                         f"{gradient_steps} gradient steps", field="application") from None
    reached = [epoch for epoch, value in zip(trajectory["epochs"], trajectory["values"],
                                             strict=True) if target <= value]
    return float(min(reached)) if reached else MAX_EPOCHS


def task_work(task: TraceTask, targets: TargetReader = "code") -> float:
    """W of the module docstring, samples."""
    target = (read_like_pandas1(task.target_text) if targets == "code"
              else float(task.target_text))
    epochs = completion_epochs(task.model, task.dataset, task.target_lr,
                               task.target_gradient_steps, target)
    return SAMPLES_PER_EPOCH[task.dataset] * epochs


def generate_titan_paper_instance(density: float = 1.0, model: str = "vit", *,
                                  targets: TargetReader = "code",
                                  round_s: float = TITAN_ROUND_S,
                                  accelerator: str = "v100") -> Instance:
    """Trace ``FM-<density>-<model>`` as an instance (module docstring): each task's work,
    speed profile at every Titan GPU option up to its ``max_gpus``, request, arrival and
    labels; the 32-GPU cluster; rounds of ``round_s``."""
    if targets not in ("code", "exact"):
        raise InputError(f"targets must be 'code' or 'exact', not {targets!r}",
                         field="targets")
    name = trace_name(density, model)
    ours = TRACE_MODELS[model]
    gpus = PAPER_NODES * GPUS_PER_NODE
    jobs: list[dict[str, Any]] = []
    classes: dict[str, list[str]] = {}
    for task in read_trace(density, model):
        steps = task.target_gradient_steps
        cap = max_gpus(ours, steps)
        g = min(task.num_gpus, cap, gpus)
        speed = throughput(ours, steps)
        work = task_work(task, targets)
        job: dict[str, Any] = {
            "id": task.name,
            "job_type": f"{ours}@{task.dataset}",
            "arrival": task.submission_time,
            "scale_factor": g,
            "total_steps": work,
            "throughput": {accelerator: speed[g]},
            "base_model": ours,
            "dataset": task.dataset,
            "duration_s": {str(a): stated(work / speed[a]) for a in sorted(speed) if a <= cap},
            "max_gpus": cap,
        }
        label_set = LABEL_SETS.get(task.dataset)
        if label_set is not None:
            if label_set not in classes:
                classes[label_set] = label_set_classes(label_set)
            job["label_set"] = label_set
            job["classes"] = classes[label_set]
        jobs.append(job)
    document = {
        "schema": INSTANCE_SCHEMA,
        "name": f"titan-paper-{name}",
        "description": (
            f"TitanSched's evaluation trace {name} (trace/main.zip at f71cf44, MIT): "
            f"{len(jobs)} tasks, work from the code's fine-tuning trajectories "
            f"(targets read as {'its pandas 1.x reader does' if targets == 'code' else 'written'}"
            f"), speed from its V100 profiles, {gpus} GPUs in {PAPER_NODES} nodes of "
            f"{GPUS_PER_NODE}."),
        "cluster": {"accelerators": {accelerator: {
            "count": gpus, "nodes": PAPER_NODES, "gpus_per_node": GPUS_PER_NODE}}},
        "jobs": jobs,
        "params": {"round_s": float(round_s)},
    }
    return instance_from_dict(document, source=f"titan paper preset {name}")


__all__ = [
    "ADD_CKPT_S", "BASELINE_ROUND_S", "LABEL_SETS", "MAX_EPOCHS", "PAPER_DENSITIES",
    "PAPER_NODES", "SAMPLES_PER_EPOCH", "TRACE_MODELS", "TraceTask", "completion_epochs",
    "generate_titan_paper_instance", "metric_key", "read_like_pandas1", "read_trace",
    "task_work", "trace_name", "trajectories",
]
