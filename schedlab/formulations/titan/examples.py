"""Small Titan instances: the seed's case table and a round of six tasks.

The same instances are shipped as files in ``instances/titan/`` (a test checks that the
files equal these builders' output).

* :func:`case_instance` (k = 1, 2, 3): the seed's task-merger case table.  Task A fine-tunes
  ViT on Fashion-MNIST, task B on CIFAR-100 (the seed's own example of a pair that gains from
  joint fine-tuning); both run on the pool of 8 GPUs; the case gives A's and B's durations and
  the merged duration as a pair entry: 20, 20 -> 25; 10, 20 -> 21; 5, 100 -> 102.
* :func:`round_example`: six tasks on 8 GPUs at a 120 s round, two mergeable pairs (Fashion-
  MNIST + CIFAR-100 on ViT, AG News + Yahoo Answers on RoBERTa), one started task and one
  whose label set is far from the others'.
"""

from __future__ import annotations

from typing import Any

from schedlab.errors import InputError
from schedlab.instance import Instance, instance_from_dict

#: (A, B, merged) seconds of the seed's three cases.
SEED_CASES: dict[int, tuple[float, float, float]] = {
    1: (20.0, 20.0, 25.0),
    2: (10.0, 20.0, 21.0),
    3: (5.0, 100.0, 102.0),
}
#: GPUs of the case table's pool.
CASE_GPUS = 8
#: Titan's round length (its workloads write it into their instances).
TITAN_ROUND_S = 120.0


def _labels(label_set: str) -> list[str]:
    from schedlab.world.concept_hierarchy import label_sets

    return list(label_sets()[label_set])


def _task(task_id: str, model: str, label_set: str, profile: dict[int, float],
          **fields: Any) -> dict[str, Any]:
    return {"id": task_id, "base_model": model, "dataset": label_set, "label_set": label_set,
            "classes": _labels(label_set),
            "duration_s": {str(g): s for g, s in profile.items()}, **fields}


def case_document(case: int) -> dict[str, Any]:
    """The instance document of the seed's case ``case`` (1, 2 or 3)."""
    if case not in SEED_CASES:
        raise InputError(f"the seed's case table has cases 1, 2 and 3, not {case}",
                         field="case")
    a, b, merged = SEED_CASES[case]
    return {
        "schema": "schedlab/instance@1",
        "name": f"titan-case-{case}",
        "description": (f"Titan's task-merger case {case}: A {a:g} s, B {b:g} s alone, "
                        f"{merged:g} s jointly (pair entry), on a pool of {CASE_GPUS} GPUs"),
        "cluster": {"accelerators": {"v100": {"count": CASE_GPUS}}},
        "jobs": [_task("A", "vit-base", "fashion_mnist", {CASE_GPUS: a}),
                 _task("B", "vit-base", "cifar100", {CASE_GPUS: b})],
        "merges": [{"tasks": ["A", "B"], "duration_s": {str(CASE_GPUS): merged}}],
        "params": {"round_s": TITAN_ROUND_S},
    }


def case_instance(case: int) -> Instance:
    """:func:`case_document` as an Instance."""
    return instance_from_dict(case_document(case), source=f"titan case {case}")


def round_document() -> dict[str, Any]:
    """Six tasks on 8 GPUs, one 120 s round (module docstring)."""
    jobs = [
        _task("fmnist", "vit-base", "fashion_mnist", {1: 3600.0, 8: 600.0}),
        _task("c100", "vit-base", "cifar100", {1: 4000.0, 8: 650.0}),
        _task("food", "vit-base", "food101", {1: 7200.0, 8: 1100.0}),
        _task("news", "roberta-base", "ag_news", {1: 1800.0, 4: 500.0}),
        _task("yahoo", "roberta-base", "yahoo_answers", {1: 2000.0, 4: 560.0}),
        _task("c10", "vit-base", "cifar10", {1: 3000.0, 8: 500.0}, total_steps=1000.0,
              steps_done=300.0),
    ]
    return {
        "schema": "schedlab/instance@1",
        "name": "titan-round-6tasks",
        "description": ("one Titan round: six fine-tuning tasks on 8 GPUs, two mergeable "
                        "pairs, one started task"),
        "cluster": {"accelerators": {"v100": {"count": 8}}},
        "jobs": jobs,
        "params": {"round_s": TITAN_ROUND_S},
    }


def round_example() -> Instance:
    """:func:`round_document` as an Instance."""
    return instance_from_dict(round_document(), source="titan round example")
