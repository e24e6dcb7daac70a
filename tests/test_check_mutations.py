"""One mutation test per violation message of the checker (schedlab/check.py and its Titan
family, schedlab/check_titan.py).

Each :class:`Mutation` starts from a valid solution (a *base*: built by hand, or a real solve
of a tiny instance), changes one thing (a share sum above 1, an unknown accelerator, an
overlapping schedule, a wrong objective, ...), and asserts that the message it names fires:
some violation matches the message's template (the f-string of check.py with each field as a
wildcard) and contains a needle with the numbers worked out by hand.  Every base is clean.

``test_every_message_has_a_mutation`` parses both modules with :mod:`ast` and fails when an
f-string that makes a violation has no mutation here (or a mutation names a message that no
longer exists): a new message needs a new mutation.
"""

from __future__ import annotations

import ast
import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import schedlab
import schedlab.check as check_module
import schedlab.check_titan as check_titan_module
from schedlab.check import check
from schedlab.instance import instance_from_dict
from schedlab.solution import (
    InstanceRef,
    PairShare,
    Placement,
    ScheduleEntry,
    Solution,
    Status,
)

#: (instance document, solution): a base and its mutations work on these two.
Case = tuple[dict[str, Any], Solution]


def make_solution(document: dict[str, Any], formulation: str = "test", **parts: Any) -> Solution:
    """A feasible-status Solution of ``document`` carrying only ``parts``."""
    instance = instance_from_dict(copy.deepcopy(document))
    return Solution(
        instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
        formulation=formulation,
        status=Status.FEASIBLE,
        **parts,
    )


# ------------------------------------------------------------------------------ bases


def gavel_document() -> dict[str, Any]:
    """2 V100 + 4 K80; a, b 1-GPU jobs that may co-locate on V100; c a 2-GPU job (K80 only)."""
    return {
        "cluster": {"accelerators": {"v100": {"count": 2}, "k80": {"count": 4}}},
        "jobs": [
            {"id": "a", "throughput": {"v100": 4.0, "k80": 1.0},
             "colocated_throughput": {"b": {"v100": 2.5}}},
            {"id": "b", "throughput": {"v100": 3.0, "k80": 1.5},
             "colocated_throughput": {"a": {"v100": 2.0}}},
            {"id": "c", "scale_factor": 2, "throughput": {"k80": 2.0}},
        ],
        "params": {"num_rounds": 0},
    }


def allocation_base() -> Case:
    """Shares a: 1/2 V100; b: 1/4 V100 + 1/4 K80; c: all of K80; a+b together 1/4 of V100.

    Per job a and b hold 3/4 of their time, c all of it; V100 GPUs: 1/2 + 1/4 + 1/4 = 1 of 2;
    K80 GPUs: 1/4 + 2 x 1 = 2.25 of 4."""
    document = gavel_document()
    return document, make_solution(
        document,
        allocation={"a": {"v100": 0.5}, "b": {"v100": 0.25, "k80": 0.25}, "c": {"k80": 1.0}},
        colocated_allocation=[PairShare(jobs=("a", "b"), accelerator="v100", fraction=0.25)],
    )


def good_round() -> list[Placement]:
    """a+b share V100 GPU 1; c on K80 GPUs 2, 3."""
    return [
        Placement(job="a", accelerator="v100", gpus=1, gpu_ids=[1], partner="b"),
        Placement(job="b", accelerator="v100", gpus=1, gpu_ids=[1], partner="a"),
        Placement(job="c", accelerator="k80", gpus=2, gpu_ids=[2, 3]),
    ]


def rounds_base() -> Case:
    """One clean round of placements on the Gavel instance."""
    document = gavel_document()
    return document, make_solution(document, rounds=[good_round()])


def solved_gavel_base() -> Case:
    """A real solve of gavel.max_min_fairness on the Gavel instance (objective compared)."""
    document = gavel_document()
    solution = schedlab.solve(instance_from_dict(copy.deepcopy(document)),
                              "gavel.max_min_fairness")
    assert solution.objective is not None and solution.objective > 0
    return document, solution


SATURN_CONFIGS = [
    {"technique": "ddp", "gpus": 2, "runtime_s": 100.0},
    {"technique": "fsdp", "gpus": 4, "runtime_s": 60.0},
    {"technique": "pipeline", "gpus": 4, "runtime_s": 70.0, "feasible": False},
]


def saturn_document() -> dict[str, Any]:
    """Two 4-GPU A100 nodes and one 2-GPU V100 node; jobs p, q (q arrives at 10 s)."""
    return {
        "cluster": {
            "accelerators": {"a100": {"count": 8}, "v100": {"count": 2}},
            "nodes": [
                {"name": "n0", "accelerator": "a100", "gpus": 4},
                {"name": "n1", "accelerator": "a100", "gpus": 4},
                {"name": "m0", "accelerator": "v100", "gpus": 2},
            ],
        },
        "jobs": [
            {"id": "p", "configs": copy.deepcopy(SATURN_CONFIGS)},
            {"id": "q", "arrival": 10.0, "configs": copy.deepcopy(SATURN_CONFIGS)},
        ],
    }


def saturn_base() -> Case:
    """p: fsdp on n0 over [0, 60); q: ddp on n0 over [60, 160) (touching, not overlapping)."""
    document = saturn_document()
    return document, make_solution(document, schedule=[
        ScheduleEntry(job="p", start=0.0, end=60.0, node="n0", gpus=4, config="fsdp"),
        ScheduleEntry(job="q", start=60.0, end=160.0, node="n0", gpus=2, config="ddp",
                      accelerator="a100"),
    ])


def segments_base() -> Case:
    """p runs twice as slow as estimated (``runtime_factor`` 2: fsdp takes 120 s, ddp 200 s)
    and resumes after a 10 s restart (``params.restart_cost_s``), in two segments: fsdp on n0
    over [0, 60) (60/120 = 1/2 of p), then ddp on n1 over [70, 180) ((110 - 10)/200 = 1/2);
    q in one piece as in :func:`saturn_base`."""
    document = saturn_document()
    document["jobs"][0]["runtime_factor"] = 2.0
    document["params"] = {"restart_cost_s": 10.0}
    return document, make_solution(
        document,
        schedule=[
            ScheduleEntry(job="p", start=0.0, end=60.0, node="n0", gpus=4, config="fsdp",
                          round=0),
            ScheduleEntry(job="p", start=70.0, end=180.0, node="n1", gpus=2, config="ddp",
                          round=1),
            ScheduleEntry(job="q", start=60.0, end=160.0, node="n0", gpus=2, config="ddp"),
        ],
    )


def hare_base() -> Case:
    """One V100 and one K80 (no nodes); job h: 2 rounds of 2 tasks; round 0 on both GPUs,
    round 1 on the V100 after the barrier at t = 3."""
    document = {
        "cluster": {"accelerators": {"v100": {"count": 1}, "k80": {"count": 1}}},
        "jobs": [{"id": "h", "rounds": 2, "tasks_per_round": 2,
                  "task_seconds": {"v100": 1.0, "k80": 3.0}}],
    }
    return document, make_solution(document, schedule=[
        ScheduleEntry(job="h", start=0, end=1, accelerator="v100", round=0),
        ScheduleEntry(job="h", start=0, end=3, accelerator="k80", round=0),
        ScheduleEntry(job="h", start=3, end=4, accelerator="v100", round=1),
        ScheduleEntry(job="h", start=4, end=5, accelerator="v100", round=1),
    ])


def hare_gpus_base() -> Case:
    """Two V100s and one K80; h: 2 rounds of 2 tasks (sigma 0.5 s on V100), g: one task
    (sigma 1 s everywhere) on V100 GPU 0 at t = 5, 1 s after h's last task there."""
    document = {
        "cluster": {"accelerators": {"v100": {"count": 2}, "k80": {"count": 1}}},
        "jobs": [{"id": "h", "rounds": 2, "tasks_per_round": 2,
                  "task_seconds": {"v100": 1.0, "k80": 3.0}, "switch_seconds": {"v100": 0.5}},
                 {"id": "g", "rounds": 1, "tasks_per_round": 1,
                  "task_seconds": {"v100": 2.0}, "switch_seconds": 1.0}],
    }

    def task(job: str, q: int, i: int, acc: str, gpu: int, start: float,
             end: float) -> ScheduleEntry:
        return ScheduleEntry(job=job, start=start, end=end, accelerator=acc, round=q, task=i,
                             gpu_ids=[gpu])

    return document, make_solution(document, schedule=[
        task("h", 0, 0, "v100", 0, 0, 1), task("h", 0, 1, "k80", 0, 0, 3),
        task("h", 1, 0, "v100", 0, 3, 4), task("h", 1, 1, "v100", 1, 3, 4),
        task("g", 0, 0, "v100", 0, 5, 7),
    ])


def titan_base() -> Case:
    """Titan tasks on 8 V100s: a (CIFAR-10) and b (Cat-vs-Dog) fine-tune vit-base, merged
    (measured: 25 s on 8 GPUs), on all 8 GPUs over [0, 25); c (AG News, roberta-base) alone
    over [25, 45), its 20 s on 8 GPUs."""
    from schedlab.world.concept_hierarchy import label_sets

    def task(job: str, model: str, label_set: str) -> dict[str, Any]:
        return {"id": job, "base_model": model, "label_set": label_set, "dataset": label_set,
                "classes": list(label_sets()[label_set]), "duration_s": {"8": 20.0}}

    document = {
        "cluster": {"accelerators": {"v100": {"count": 8}}},
        "jobs": [task("a", "vit-base", "cifar10"), task("b", "vit-base", "cat_vs_dog"),
                 task("c", "roberta-base", "ag_news")],
        "merges": [{"tasks": ["a", "b"], "duration_s": {"8": 25.0}}],
    }
    return document, make_solution(document, groups=[["a", "b"]], schedule=[
        ScheduleEntry(job="a", start=0.0, end=25.0, accelerator="v100", gpus=8),
        ScheduleEntry(job="b", start=0.0, end=25.0, accelerator="v100", gpus=8),
        ScheduleEntry(job="c", start=25.0, end=45.0, accelerator="v100", gpus=8),
    ])


BASES: dict[str, Callable[[], Case]] = {
    "allocation": allocation_base,
    "rounds": rounds_base,
    "solved_gavel": solved_gavel_base,
    "saturn": saturn_base,
    "segments": segments_base,
    "hare": hare_base,
    "hare_gpus": hare_gpus_base,
    "titan": titan_base,
}


# -------------------------------------------------------------------------- mutations


@dataclass(frozen=True)
class Mutation:
    """One minimal change that must make check.py's message ``template`` (an f-string of
    ``function``, fields shown as ``{}``) fire, with ``needle`` in its text."""

    name: str
    function: str
    template: str
    base: str
    mutate: Callable[[dict[str, Any], Solution], None]
    needle: str


def _entry(solution: Solution, job: str, segment: int | None = None) -> ScheduleEntry:
    """The schedule entry of ``job`` (segment ``segment`` when given)."""
    return next(e for e in solution.schedule
                if e.job == job and (segment is None or e.round == segment))


def _placement(solution: Solution, job: str) -> Placement:
    """``job``'s placement in round 0."""
    return next(p for p in solution.rounds[0] if p.job == job)


def _set(obj: Any, **changes: Any) -> None:
    """Assign attributes (models do not validate assignments: a mutation may break one)."""
    for key, value in changes.items():
        setattr(obj, key, value)


def _edit_entry(job: str, segment: int | None = None, **changes: Any
                ) -> Callable[[dict[str, Any], Solution], None]:
    return lambda d, s: _set(_entry(s, job, segment), **changes)


def _edit_placement(job: str, **changes: Any) -> Callable[[dict[str, Any], Solution], None]:
    return lambda d, s: _set(_placement(s, job), **changes)


def _add_placement(**fields: Any) -> Callable[[dict[str, Any], Solution], None]:
    return lambda d, s: s.rounds[0].append(Placement(**fields))


def _add_entry(**fields: Any) -> Callable[[dict[str, Any], Solution], None]:
    return lambda d, s: s.schedule.append(ScheduleEntry(**fields))


def _drop_entry(job: str, start: float) -> Callable[[dict[str, Any], Solution], None]:
    def mutate(document: dict[str, Any], solution: Solution) -> None:
        solution.schedule = [e for e in solution.schedule
                             if not (e.job == job and e.start == start)]
    return mutate


def _all(*mutations: Callable[[dict[str, Any], Solution], None]
         ) -> Callable[[dict[str, Any], Solution], None]:
    """The mutations one after another."""
    def mutate(document: dict[str, Any], solution: Solution) -> None:
        for one in mutations:
            one(document, solution)
    return mutate


def _pair(**changes: Any) -> Callable[[dict[str, Any], Solution], None]:
    return lambda d, s: _set(s.colocated_allocation[0], **changes)


def _share(job: str, acc: str, value: float) -> Callable[[dict[str, Any], Solution], None]:
    return lambda d, s: s.allocation.setdefault(job, {}).__setitem__(acc, value)


def _pool_count(acc: str, count: int) -> Callable[[dict[str, Any], Solution], None]:
    return lambda d, s: d["cluster"]["accelerators"][acc].__setitem__("count", count)


def _drop_task_seconds(job: int, acc: str) -> Callable[[dict[str, Any], Solution], None]:
    return lambda d, s: d["jobs"][job]["task_seconds"].pop(acc)


def _scale_objective(factor: float) -> Callable[[dict[str, Any], Solution], None]:
    return lambda d, s: _set(s, objective=(s.objective or 0.0) * factor)


WHERE_P = "{}: "  # messages that start with a ``where`` prefix

MUTATIONS: list[Mutation] = [
    # ------------------------------------------------------------- allocation
    Mutation("unknown job in allocation", "check_allocation",
             "allocation names unknown job {}", "allocation",
             _share("zz", "k80", 0.1), "allocation names unknown job 'zz'"),
    Mutation("pair with unknown job", "check_allocation",
             "co-located pair {}+{} names an unknown job", "allocation",
             _pair(jobs=("a", "zz")), "co-located pair a+zz names an unknown job"),
    Mutation("pair on unknown accelerator", "check_allocation",
             "co-located pair {}+{}: unknown accelerator {}", "allocation",
             _pair(accelerator="a100"), "co-located pair a+b: unknown accelerator 'a100'"),
    Mutation("pair share above 1", "check_allocation",
             "co-located pair {}+{} on {}: share {} outside [0, 1]", "allocation",
             _pair(fraction=1.5), "co-located pair a+b on v100: share 1.5 outside [0, 1]"),
    Mutation("pair on the wrong type", "check_allocation",
             "co-located pair {}+{} on {}: share {} but no co-location throughput given",
             "allocation", _pair(accelerator="k80", fraction=0.1),
             "co-located pair a+b on k80: share 0.1 but no co-location throughput given"),
    Mutation("share sum above 1", "check_allocation",
             "job {}: shares sum to {} > 1", "allocation",
             _share("a", "v100", 0.8), "job a: shares sum to 1.05 > 1"),
    Mutation("GPUs of a type overrun", "check_allocation",
             "accelerator {}: {} GPUs allocated > {} available", "allocation",
             _pool_count("k80", 2), "accelerator k80: 2.25 GPUs allocated > 2 available"),
    Mutation("share on unknown accelerator", "check_allocation",
             "job {}: unknown accelerator {}", "allocation",
             _share("a", "a100", 0.1), "job a: unknown accelerator 'a100'"),
    Mutation("negative share", "check_allocation",
             "job {} on {}: share {} outside [0, 1]", "allocation",
             _share("c", "k80", -0.5), "job c on k80: share -0.5 outside [0, 1]"),
    Mutation("share where the job has no throughput", "check_allocation",
             "job {} on {}: share {} but no throughput there", "allocation",
             _share("c", "v100", 0.1), "job c on v100: share 0.1 but no throughput there"),
    # ----------------------------------------------------------------- rounds
    Mutation("placed twice", "_check_round_placements",
             "round {}: job {} placed {} times", "rounds",
             _add_placement(job="c", accelerator="k80", gpus=2, gpu_ids=[0, 1]),
             "round 0: job c placed 2 times"),
    Mutation("placement of unknown job", "_check_round_placements",
             "round {}: placement names unknown job {}", "rounds",
             _add_placement(job="zz", accelerator="k80", gpus=1),
             "round 0: placement names unknown job 'zz'"),
    Mutation("placement on unknown accelerator", "_check_round_placements",
             "round {}: job {}: unknown accelerator {}", "rounds",
             _edit_placement("c", accelerator="a100"),
             "round 0: job c: unknown accelerator 'a100'"),
    Mutation("broken gang", "_check_round_placements",
             WHERE_P + "gang of {} GPUs but scale factor {}", "rounds",
             _edit_placement("c", gpus=1, gpu_ids=[2]),
             "round 0: job c on k80: gang of 1 GPUs but scale factor 2"),
    Mutation("placement where the job has no throughput", "_check_round_placements",
             WHERE_P + "no positive throughput there", "rounds",
             _edit_placement("c", accelerator="v100", gpu_ids=[0, 1]),
             "round 0: job c on v100: no positive throughput there"),
    Mutation("pair on the wrong type in a round", "_check_round_placements",
             WHERE_P + "no co-location throughput with partner {}", "rounds",
             _all(_edit_placement("a", accelerator="k80", gpu_ids=[0]),
                  _edit_placement("b", accelerator="k80", gpu_ids=[0])),
             "round 0: job a on k80: no co-location throughput with partner b"),
    Mutation("too few gpu ids", "_check_gpu_id_list",
             WHERE_P + "{} gpu_ids for a gang of {} GPUs", "rounds",
             _edit_placement("c", gpu_ids=[2]), "round 0: job c on k80: 1 gpu_ids for a gang of 2"),
    Mutation("repeated gpu ids", "_check_gpu_id_list",
             WHERE_P + "repeated gpu_ids {}", "rounds",
             _edit_placement("c", gpu_ids=[2, 2]),
             "round 0: job c on k80: repeated gpu_ids [2, 2]"),
    Mutation("gpu id out of range", "_check_gpu_id_list",
             WHERE_P + "gpu_ids {} outside 0..{}", "rounds",
             _edit_placement("c", gpu_ids=[3, 4]),
             "round 0: job c on k80: gpu_ids [4] outside 0..3"),
    Mutation("own partner", "_check_round_partners",
             WHERE_P + "names itself as co-location partner", "rounds",
             _edit_placement("a", partner="a"),
             "round 0: job a on v100: names itself as co-location partner"),
    Mutation("partner not mutual", "_check_round_partners",
             WHERE_P + "names partner {} but {} is not placed on {} naming {} as its partner",
             "rounds", _edit_placement("b", partner=None, gpu_ids=[0]),
             "round 0: job a on v100: names partner b but b is not placed on v100 naming a"),
    Mutation("gpu ids on one partner only", "_check_round_partners",
             WHERE_P + "gpu_ids given for only one of the pair {}+{}", "rounds",
             _edit_placement("b", gpu_ids=None),
             "round 0: job a on v100: gpu_ids given for only one of the pair a+b"),
    Mutation("pair on different GPUs", "_check_round_partners",
             WHERE_P + "co-located pair {}+{} does not share GPUs ({} vs {})", "rounds",
             _edit_placement("b", gpu_ids=[0]),
             "round 0: job a on v100: co-located pair a+b does not share GPUs ([1] vs [0])"),
    Mutation("three jobs on one GPU", "_check_round_gpu_ids",
             "round {}: {} GPU {} used by {} jobs ({})", "rounds",
             _edit_placement("c", accelerator="v100", gpu_ids=[0, 1]),
             "round 0: v100 GPU 1 used by 3 jobs (a, b, c)"),
    Mutation("GPU shared by strangers", "_check_round_gpu_ids",
             "round {}: {} GPU {} used by both {} and {}, which are not co-located partners",
             "rounds",
             _all(_edit_placement("a", accelerator="k80", gpu_ids=[3], partner=None),
                  _edit_placement("b", partner=None)),
             "round 0: k80 GPU 3 used by both a and c, which are not co-located partners"),
    Mutation("round over capacity", "_check_round_capacity",
             "round {}: accelerator {}: {} GPUs placed > {} available", "rounds",
             _edit_placement("c", accelerator="v100", gpu_ids=None),
             "round 0: accelerator v100: 3 GPUs placed > 2 available"),
    # --------------------------------------------------------------- schedule
    Mutation("entry of unknown job", "_check_schedule_entries",
             "schedule[{}] names unknown job {}", "saturn",
             _add_entry(job="zz", start=0, end=1, node="n1"),
             "schedule[2] names unknown job 'zz'"),
    Mutation("infinite end", "_check_schedule_entries",
             WHERE_P + "start {} / end {} not finite", "saturn",
             _edit_entry("q", end=math.inf), "schedule[1] job q: start 60.0 / end inf not finite"),
    Mutation("start before arrival", "_check_schedule_entries",
             WHERE_P + "starts at {} s before its arrival {} s", "saturn",
             _edit_entry("q", start=5.0, end=105.0),
             "schedule[1] job q: starts at 5 s before its arrival 10 s"),
    Mutation("end before start", "_check_schedule_entries",
             WHERE_P + "ends at {} s before it starts at {} s", "saturn",
             _edit_entry("q", end=50.0),
             "schedule[1] job q: ends at 50 s before it starts at 60 s"),
    Mutation("no GPUs", "_check_schedule_entries",
             WHERE_P + "{} GPUs (must be >= 1)", "saturn",
             _edit_entry("q", gpus=0), "schedule[1] job q: 0 GPUs (must be >= 1)"),
    Mutation("entry on unknown accelerator", "_check_schedule_entries",
             WHERE_P + "unknown accelerator {}", "saturn",
             _edit_entry("q", accelerator="h100"), "schedule[1] job q: unknown accelerator 'h100'"),
    Mutation("entry on no type", "_check_schedule_entries",
             WHERE_P + "names neither an accelerator nor a node (cluster has {} types)", "hare",
             lambda d, s: _set(s.schedule[0], accelerator=None),
             "schedule[0] job h: names neither an accelerator nor a node (cluster has 2 types)"),
    Mutation("entry on unknown node", "_check_schedule_entries",
             WHERE_P + "unknown node {}", "saturn",
             _edit_entry("q", node="n9"), "schedule[1] job q: unknown node 'n9'"),
    Mutation("accelerator disagrees with node", "_check_schedule_entries",
             WHERE_P + "accelerator {} but node {} holds {} GPUs", "saturn",
             _edit_entry("q", accelerator="v100"),
             "schedule[1] job q: accelerator v100 but node n0 holds a100 GPUs"),
    Mutation("node overload", "_check_node_capacity",
             "node {}: {} GPUs in use at t={} s > {} available (jobs {})", "saturn",
             _edit_entry("q", start=30.0, end=130.0),
             "node n0: 6 GPUs in use at t=30 s > 4 available (jobs p, q)"),
    Mutation("type overload", "_check_type_capacity",
             "accelerator {}: {} GPUs in use at t={} s > {} available (jobs {})", "hare",
             lambda d, s: _set(s.schedule[3], start=3, end=4),
             "accelerator v100: 2 GPUs in use at t=3 s > 1 available (jobs h, h)"),
    # ------------------------------------------------------------ Saturn jobs
    Mutation("not scheduled", "_check_saturn_job",
             "job {}: not scheduled (a Saturn job runs exactly once)", "saturn",
             _drop_entry("q", 60.0), "job q: not scheduled"),
    Mutation("scheduled twice", "_check_saturn_job",
             "job {}: {} schedule entries (a Saturn job runs once, with one configuration, on "
             "one node)", "saturn",
             _add_entry(job="q", start=200, end=300, node="n1", gpus=2, config="ddp"),
             "job q: 2 schedule entries"),
    Mutation("no node", "_check_saturn_job",
             WHERE_P + "no node given (cluster has nodes)", "saturn",
             _edit_entry("q", node=None), "job q: no node given (cluster has nodes)"),
    Mutation("no configuration", "_check_saturn_job",
             WHERE_P + "no configuration given", "saturn",
             _edit_entry("q", config=None), "job q: no configuration given"),
    Mutation("unknown configuration", "_check_saturn_job",
             WHERE_P + "configuration {} on {} GPUs is not one of its configurations ({})",
             "saturn", _edit_entry("q", config="zero3"),
             "job q: configuration zero3 on 2 GPUs is not one of its configurations "
             "(ddpx2, fsdpx4, pipelinex4)"),
    Mutation("infeasible configuration", "_check_saturn_job",
             WHERE_P + "configuration {} on {} GPUs is infeasible", "saturn",
             _edit_entry("q", config="pipeline", gpus=4, end=130.0),
             "job q: configuration pipeline on 4 GPUs is infeasible"),
    Mutation("wrong runtime", "_check_saturn_job",
             WHERE_P + "runs {} s but configuration {} on {} GPUs takes {} s", "saturn",
             _edit_entry("q", end=161.0),
             "job q: runs 101 s but configuration ddp on 2 GPUs takes 100 s"),
    # -------------------------------------------------------- Saturn segments
    Mutation("segment without configuration", "_saturn_config",
             WHERE_P + "no configuration given", "segments",
             _edit_entry("p", 1, config=None), "job p segment 1: no configuration given"),
    Mutation("segment in unknown configuration", "_saturn_config",
             WHERE_P + "configuration {} on {} GPUs is not one of its configurations ({})",
             "segments", _edit_entry("p", 1, config="zero3"),
             "job p segment 1: configuration zero3 on 2 GPUs is not one of its"),
    Mutation("segment in infeasible configuration", "_saturn_config",
             WHERE_P + "configuration {} on {} GPUs is infeasible", "segments",
             _edit_entry("p", 1, config="pipeline", gpus=4),
             "job p segment 1: configuration pipeline on 4 GPUs is infeasible"),
    Mutation("segment index on some entries only", "_check_saturn_segments",
             "job {}: some entries have a segment index (round) and some not", "segments",
             _edit_entry("p", 1, round=None),
             "job p: some entries have a segment index (round) and some not"),
    Mutation("wrong segment index", "_check_saturn_segments",
             "job {}: segment indices {} are not 0..{} once each", "segments",
             _edit_entry("p", 1, round=2), "job p: segment indices [0, 2] are not 0..1 once each"),
    Mutation("segments do not cover the job", "_check_saturn_segments",
             "job {}: segments cover {} of the job (must be 1: sum of (duration - restart "
             "cost) / true runtime)", "segments",
             _edit_entry("p", 1, end=160.0), "job p: segments cover 0.9 of the job"),
    Mutation("segments overlap", "_check_saturn_segments",
             "job {}: segment {} starts at {} s before segment {} ends at {} s", "segments",
             _edit_entry("p", 1, start=50.0, end=160.0),
             "job p: segment 1 starts at 50 s before segment 0 ends at 60 s"),
    Mutation("segment without node", "_check_saturn_segments",
             WHERE_P + "no node given (cluster has nodes)", "segments",
             _edit_entry("p", 1, node=None), "job p segment 1: no node given (cluster has nodes)"),
    # ---------------------------------------------------------------- Hare
    Mutation("task without round index", "_check_hare_job",
             "job {}: task at t={} s has no round index", "hare",
             lambda d, s: _set(s.schedule[3], round=None),
             "job h: task at t=4 s has no round index"),
    Mutation("barrier broken", "_check_hare_job",
             "job {}: round {} starts at {} s before round {} ends at {} s (barrier)", "hare",
             lambda d, s: _set(s.schedule[2], start=2, end=3),
             "job h: round 1 starts at 2 s before round 0 ends at 3 s (barrier)"),
    Mutation("round index out of range", "_check_hare_job",
             "job {}: round index {} outside 0..{}", "hare",
             lambda d, s: _set(s.schedule[3], round=2), "job h: round index 2 outside 0..1"),
    Mutation("round with a task missing", "_check_hare_job",
             "job {}: round {} has {} tasks, expected {}", "hare",
             lambda d, s: _set(s, schedule=s.schedule[:3]),
             "job h: round 1 has 1 tasks, expected 2"),
    Mutation("task on a type without task time", "_check_hare_task_time",
             "job {}: task on {}, which has no task_seconds", "hare",
             _drop_task_seconds(0, "k80"), "job h: task on k80, which has no task_seconds"),
    Mutation("task too short", "_check_hare_task_time",
             "job {}: task on {} runs {} s < its task time {} s", "hare",
             lambda d, s: _set(s.schedule[1], end=2),
             "job h: task on k80 runs 2 s < its task time 3 s"),
    Mutation("task too long", "_check_hare_task_time",
             "job {}: task on {} runs {} s > its task time {} s (a task runs exactly its task "
             "time)", "hare", lambda d, s: _set(s.schedule[1], end=4),
             "job h: task on k80 runs 4 s > its task time 3 s"),
    Mutation("task index out of range", "_check_hare_task_indices",
             "job {}: round {} task index {} outside 0..{}", "hare_gpus",
             lambda d, s: _set(s.schedule[3], task=2), "job h: round 1 task index 2 outside 0..1"),
    Mutation("task run twice", "_check_hare_task_indices",
             "job {}: round {} task {} runs {} times (every task runs exactly once)", "hare_gpus",
             lambda d, s: _set(s.schedule[3], task=0), "job h: round 1 task 0 runs 2 times"),
    Mutation("task names no GPU", "_hare_gpu",
             "job {}: task at t={} s on {} names no GPU (gpu_ids; the type has {} GPUs)",
             "hare_gpus", lambda d, s: _set(s.schedule[2], gpu_ids=None),
             "job h: task at t=3 s on v100 names no GPU (gpu_ids; the type has 2 GPUs)"),
    Mutation("task on a GPU outside the pool", "_hare_gpu",
             "job {}: task at t={} s on {} has gpu_ids {} (one index in 0..{})", "hare_gpus",
             lambda d, s: _set(s.schedule[2], gpu_ids=[2]),
             "job h: task at t=3 s on v100 has gpu_ids [2] (one index in 0..1)"),
    Mutation("two tasks on one GPU at once", "_check_hare_gpus",
             "{} GPU {}: tasks of {} [{}, {}) and {} [{}, {}) overlap", "hare_gpus",
             lambda d, s: _set(s.schedule[3], gpu_ids=[0]),
             "v100 GPU 0: tasks of h [3, 4) and h [3, 4) overlap"),
    Mutation("switch gap too short", "_check_hare_gpus",
             "{} GPU {}: task of {} starts at {} s, {} s after {}'s task ended; the switch "
             "needs {} s", "hare_gpus", lambda d, s: _set(s.schedule[4], start=4.5, end=6.5),
             "v100 GPU 0: task of g starts at 4.5 s, 0.5 s after h's task ended; the switch "
             "needs 1 s"),
    Mutation("first task without its switch", "_check_hare_gpus",
             "{} GPU {}: first task (job {}) starts at {} s < its switch time {} s "
             "(switch_on_first_task)", "hare_gpus",
             lambda d, s: d.setdefault("params", {}).__setitem__("switch_on_first_task", True),
             "v100 GPU 0: first task (job h) starts at 0 s < its switch time 0.5 s"),
    Mutation("round spread over two types", "_check_hare_round_types",
             "job {}: round {} runs on {} (one_type_per_round: one GPU type per round)",
             "hare_gpus",
             lambda d, s: d.setdefault("params", {}).__setitem__("one_type_per_round", True),
             "job h: round 0 runs on k80, v100 (one_type_per_round: one GPU type per round)"),
    # ------------------------------------------------------------ Titan groups
    Mutation("group of one task", "check_groups",
             "group {}: {} task(s) (a merged group has at least 2)", "titan",
             lambda d, s: s.groups.append(["c"]),
             "group 1: 1 task(s) (a merged group has at least 2)"),
    Mutation("group with an unknown task", "check_groups", "group {}: unknown task {}",
             "titan", lambda d, s: s.groups[0].append("zz"), "group 0: unknown task 'zz'"),
    Mutation("task in two groups", "check_groups", "task {} is in groups {} and {}", "titan",
             lambda d, s: s.groups.append(["a", "c"]), "task a is in groups 0 and 1"),
    Mutation("merged task had started", "check_groups",
             "group {}: task {} had started (steps_done {})", "titan",
             lambda d, s: d["jobs"][1].__setitem__("steps_done", 5.0),
             "group 0: task b had started (steps_done 5)"),
    Mutation("merged tasks of two base models", "check_groups",
             "group {}: {} and {} fine-tune different base models ({} vs {})", "titan",
             lambda d, s: d["jobs"][1].__setitem__("base_model", "roberta-base"),
             "group 0: a and b fine-tune different base models (vit-base vs roberta-base)"),
    Mutation("merged tasks not similar enough", "check_groups",
             "group {}: task similarity of {} and {} is {} < threshold {}", "titan",
             lambda d, s: d.__setitem__("params", {"similarity_threshold": 0.99}),
             "< threshold 0.99"),
    Mutation("merged task not scheduled", "check_groups",
             "group {}: task {} has no schedule entry", "titan", _drop_entry("b", 0.0),
             "group 0: task b has no schedule entry"),
    Mutation("merged tasks start apart", "check_groups", "group {}: {} starts at {} s but {} "
             "at {} s", "titan", _edit_entry("b", start=1.0),
             "group 0: b starts at 1 s but a at 0 s"),
    # ------------------------------------------------------ Titan durations
    Mutation("Titan task on more GPUs than it can use", "_check_gpu_counts",
             WHERE_P + "on {} GPUs at t={} s, more than the {} {} can use (no duration there)",
             "titan", _edit_entry("c", gpus=9),
             "task c: on 9 GPUs at t=25 s, more than the 8 it can use"),
    Mutation("Titan task runs longer than its duration", "_check_durations",
             WHERE_P + "runs {} s on {} GPUs but {} takes {} s there ({} of its work left)",
             "titan", _edit_entry("c", end=46.0),
             "task c: runs 21 s on 8 GPUs but it takes 20 s there (1 of its work left)"),
    Mutation("Titan task's entries cover too little", "_check_durations",
             WHERE_P + "its {} entries do {} of the work but {} is left (sum of seconds / "
             "duration at their GPUs)", "titan",
             _all(_edit_entry("c", end=35.0),
                  _add_entry(job="c", start=35.0, end=44.0, accelerator="v100", gpus=8)),
             "task c: its 2 entries do 0.95 of the work but 1 is left"),
    Mutation("merged group of three", "_how_tasks_run",
             "group {}: {} tasks ({}); a merged duration is defined only for pairs", "titan",
             lambda d, s: s.groups[0].append("c"),
             "group 0: 3 tasks (a, b, c); a merged duration is defined only for pairs"),
    Mutation("merged tasks end apart", "_check_groups_run_together",
             "group {}: {} runs {} but {} runs {} (a merged group runs as one job)", "titan",
             _edit_entry("b", end=26.0),
             "group 0: b runs [0, 26) on 8 GPUs but a runs [0, 25) on 8 GPUs"),
    # -------------------------------------------------------------- objective
    Mutation("wrong objective", "check_objective",
             "objective: {} claims {} but its allocation or schedule gives {} (relative "
             "tolerance {})", "solved_gavel", _scale_objective(1.01),
             "objective: gavel.max_min_fairness claims "),
]


def _template_regex(template: str) -> re.Pattern[str]:
    """``template`` with each ``{}`` matching any text."""
    return re.compile(".+?".join(re.escape(part) for part in template.split("{}")), re.DOTALL)


@pytest.mark.parametrize("base", sorted(BASES))
def test_base_is_clean(base: str) -> None:
    document, solution = BASES[base]()
    assert check(instance_from_dict(document), solution) == []


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_mutation_fires_its_message(mutation: Mutation) -> None:
    document, solution = BASES[mutation.base]()
    assert check(instance_from_dict(copy.deepcopy(document)), solution) == []
    mutation.mutate(document, solution)
    violations = check(instance_from_dict(document), solution)
    pattern = _template_regex(mutation.template)
    assert any(pattern.fullmatch(v) and mutation.needle in v for v in violations), violations


def test_wrong_objective_names_both_values() -> None:
    """The objective message gives the claimed and the re-derived value: 1% up from d."""
    document, solution = solved_gavel_base()
    derived = solution.objective
    assert derived is not None
    _scale_objective(1.01)(document, solution)
    (message,) = check(instance_from_dict(document), solution)
    claimed_text, derived_text = re.findall(r"claims (\S+) but .* gives (\S+) ", message)[0]
    assert float(claimed_text) == pytest.approx(1.01 * derived, rel=1e-9)
    assert float(derived_text) == pytest.approx(derived, rel=1e-9)


# ------------------------------------------------------------------ coverage by ast


#: f-strings of check.py that are not violations: ``where`` prefixes and list fragments.
NOT_MESSAGES = {
    ("_check_round_placements", "round {}: job {} on {}"),
    ("_check_round_partners", "round {}: job {} on {}"),
    ("_names", ", ... ({} in all)"),
    ("_check_schedule_entries", "schedule[{}] job {}"),
    ("_check_saturn_job", "job {}"),
    ("_check_saturn_job", "{}x{}"),
    ("_saturn_config", "{}x{}"),
    ("_check_saturn_segments", "job {} segment {}"),
    ("who", "task {}"),
    ("who", "task {} (merged with {})"),
    ("_spans", "[{}, {}) on {} GPUs"),
}


def _template(node: ast.JoinedStr) -> str:
    """The f-string's literal text with ``{}`` for each field."""
    return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)


def checker_messages() -> set[tuple[str, str]]:
    """(function, template) of every f-string in check.py and check_titan.py (format specs
    excluded), and of every plain string appended to a list or returned in one."""
    found: set[tuple[str, str]] = set()
    functions = [node for module in (check_module, check_titan_module)
                 for node in ast.walk(ast.parse(Path(module.__file__ or "").read_text()))]
    for function in functions:
        if not isinstance(function, ast.FunctionDef):
            continue
        specs = {id(n.format_spec) for n in ast.walk(function)
                 if isinstance(n, ast.FormattedValue) and n.format_spec is not None}
        for node in ast.walk(function):
            if isinstance(node, ast.JoinedStr) and id(node) not in specs:
                found.add((function.name, _template(node)))
            literals: list[ast.expr] = []
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "append"):
                literals = list(node.args)
            elif isinstance(node, ast.Return) and isinstance(node.value, ast.List):
                literals = list(node.value.elts)
            for literal in literals:
                if isinstance(literal, ast.Constant) and isinstance(literal.value, str):
                    found.add((function.name, literal.value))
    return found


def test_every_message_has_a_mutation() -> None:
    messages = checker_messages() - NOT_MESSAGES
    covered = {(m.function, m.template) for m in MUTATIONS}
    assert messages - covered == set(), "messages of check.py without a mutation test"
    assert covered - messages == set(), "mutations of messages check.py no longer has"
    assert NOT_MESSAGES <= checker_messages(), "stale entries in NOT_MESSAGES"


def test_mutation_names_are_unique() -> None:
    names = [m.name for m in MUTATIONS]
    assert len(names) == len(set(names))
