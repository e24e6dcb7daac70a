"""The independent checker: each violation family is reported, feasible solutions are clean."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.check import check, check_rounds, check_schedule
from schedlab.instance import Instance, instance_from_dict
from schedlab.registry import get_formulation
from schedlab.solution import (
    InstanceRef,
    PairShare,
    Placement,
    ScheduleEntry,
    Solution,
    Status,
)


def make_solution(instance: Instance, **parts: Any) -> Solution:
    """A feasible-status Solution carrying only ``parts`` (rounds, schedule, allocation)."""
    return Solution(
        instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
        formulation="test",
        status=Status.FEASIBLE,
        **parts,
    )


def reported(violations: list[str], *needles: str) -> None:
    """Some violation mentions every needle."""
    assert any(all(n in v for n in needles) for v in violations), violations


# ---------------------------------------------------------------------------- rounds


@pytest.fixture
def gavel() -> Instance:
    """2 V100 + 4 K80; a, b 1-GPU jobs that may co-locate on V100; c a 2-GPU job."""
    return instance_from_dict(
        {
            "cluster": {"accelerators": {"v100": {"count": 2}, "k80": {"count": 4}}},
            "jobs": [
                {"id": "a", "throughput": {"v100": 4.0, "k80": 1.0},
                 "colocated_throughput": {"b": {"v100": 2.5}}},
                {"id": "b", "throughput": {"v100": 3.0, "k80": 1.5},
                 "colocated_throughput": {"a": {"v100": 2.0}}},
                {"id": "c", "scale_factor": 2, "throughput": {"k80": 2.0}},
            ],
        }
    )


def good_round() -> list[Placement]:
    """a+b share V100 GPU 1; c on K80 GPUs 2, 3."""
    return [
        Placement(job="a", accelerator="v100", gpus=1, gpu_ids=[1], partner="b"),
        Placement(job="b", accelerator="v100", gpus=1, gpu_ids=[1], partner="a"),
        Placement(job="c", accelerator="k80", gpus=2, gpu_ids=[2, 3]),
    ]


def test_feasible_rounds_report_nothing(gavel: Instance) -> None:
    solo = [
        Placement(job="a", accelerator="v100", gpus=1, gpu_ids=[0]),
        Placement(job="b", accelerator="v100", gpus=1, gpu_ids=[1]),
        Placement(job="c", accelerator="k80", gpus=2),
    ]
    assert check(gavel, make_solution(gavel, rounds=[good_round(), solo, []])) == []


def _replace(round_: list[Placement], job: str, **changes: Any) -> list[Placement]:
    return [p.model_copy(update=changes) if p.job == job else p for p in round_]


ROUND_CASES: list[tuple[str, list[Placement], tuple[str, ...]]] = [
    ("unknown job", [*good_round(), Placement(job="zz", accelerator="k80", gpus=1)],
     ("unknown job", "zz")),
    ("unknown accelerator", _replace(good_round(), "c", accelerator="a100"),
     ("job c", "unknown accelerator", "a100")),
    ("gang size", _replace(good_round(), "c", gpus=1, gpu_ids=[2]),
     ("job c on k80", "gang of 1 GPUs but scale factor 2")),
    ("id count", _replace(good_round(), "c", gpu_ids=[2]), ("job c on k80", "1 gpu_ids")),
    ("repeated ids", _replace(good_round(), "c", gpu_ids=[2, 2]), ("job c", "repeated")),
    ("id range", _replace(good_round(), "c", gpu_ids=[3, 4]), ("job c", "[4]", "0..3")),
    ("no throughput", [Placement(job="c", accelerator="v100", gpus=2, gpu_ids=[0, 1])],
     ("job c on v100", "no positive throughput")),
    ("no colocation throughput",
     _replace(_replace(good_round(), "a", accelerator="k80", gpu_ids=[0]), "b",
              accelerator="k80", gpu_ids=[0]),
     ("job a on k80", "no co-location throughput with partner b")),
    ("placed twice", [*good_round(), Placement(job="c", accelerator="k80", gpus=2,
                                               gpu_ids=[0, 1])],
     ("job c placed 2 times",)),
    ("partner not mutual", _replace(good_round(), "b", partner=None, gpu_ids=[0]),
     ("job a on v100", "names partner b")),
    ("pair not sharing GPUs", _replace(good_round(), "b", gpu_ids=[0]),
     ("a+b", "does not share GPUs")),
    ("GPU shared by strangers",
     [Placement(job="a", accelerator="k80", gpus=1, gpu_ids=[3]), *good_round()[2:]],
     ("k80 GPU 3", "both a and c", "not co-located partners")),
    ("three on a GPU",
     [*good_round()[:2], Placement(job="c", accelerator="v100", gpus=2, gpu_ids=[0, 1])],
     ("v100 GPU 1 used by 3 jobs",)),
    ("capacity",
     [Placement(job="a", accelerator="v100", gpus=1), Placement(job="b", accelerator="v100",
                                                                gpus=1),
      Placement(job="c", accelerator="v100", gpus=2)],
     ("accelerator v100: 4 GPUs placed > 2 available",)),
]


@pytest.mark.parametrize(
    ("round_", "needles"), [(r, n) for _, r, n in ROUND_CASES], ids=[c[0] for c in ROUND_CASES]
)
def test_round_violation_reported(
    gavel: Instance, round_: list[Placement], needles: tuple[str, ...]
) -> None:
    violations = check(gavel, make_solution(gavel, rounds=[good_round(), round_]))
    reported(violations, *needles)
    assert all("round 1" in v for v in violations), violations  # round 0 is clean


def test_pair_counts_once_at_its_larger_gang(gavel: Instance) -> None:
    """a+b on one V100 GPU plus one solo job fills 2 V100s exactly; a third GPU would not fit."""
    round_ = [*good_round()[:2], Placement(job="c", accelerator="k80", gpus=2, gpu_ids=[0, 1])]
    assert check_rounds(gavel, make_solution(gavel, rounds=[round_])) == []


# -------------------------------------------------------------------------- schedule


@pytest.fixture
def saturn() -> Instance:
    """Two 4-GPU A100 nodes; jobs p, q with two configurations each."""
    configs = [
        {"technique": "ddp", "gpus": 2, "runtime_s": 100.0},
        {"technique": "fsdp", "gpus": 4, "runtime_s": 60.0},
        {"technique": "pipeline", "gpus": 4, "runtime_s": 70.0, "feasible": False},
    ]
    return instance_from_dict(
        {
            "cluster": {
                "accelerators": {"a100": {"count": 8}},
                "nodes": [
                    {"name": "n0", "accelerator": "a100", "gpus": 4},
                    {"name": "n1", "accelerator": "a100", "gpus": 4},
                ],
            },
            "jobs": [
                {"id": "p", "configs": configs},
                {"id": "q", "arrival": 10.0, "configs": configs},
            ],
        }
    )


def saturn_plan() -> list[ScheduleEntry]:
    """p: fsdp on n0 over [0, 60); q: ddp on n0 over [60, 160) (touching, not overlapping)."""
    return [
        ScheduleEntry(job="p", start=0.0, end=60.0, node="n0", gpus=4, config="fsdp"),
        ScheduleEntry(job="q", start=60.0, end=160.0, node="n0", gpus=2, config="ddp",
                      accelerator="a100"),
    ]


def test_feasible_saturn_schedule_reports_nothing(saturn: Instance) -> None:
    assert check(saturn, make_solution(saturn, schedule=saturn_plan())) == []


def _edit(plan: list[ScheduleEntry], job: str, **changes: Any) -> list[ScheduleEntry]:
    return [e.model_copy(update=changes) if e.job == job else e for e in plan]


SATURN_CASES: list[tuple[str, list[ScheduleEntry], tuple[str, ...]]] = [
    ("before arrival", _edit(saturn_plan(), "q", start=5.0, end=105.0),
     ("job q", "before its arrival 10")),
    ("ends before start", _edit(saturn_plan(), "q", end=50.0), ("job q", "ends at 50")),
    ("unknown job", [*saturn_plan(), ScheduleEntry(job="zz", start=0, end=1, node="n1")],
     ("unknown job", "zz")),
    ("unknown node", _edit(saturn_plan(), "q", node="n9"), ("job q", "unknown node 'n9'")),
    ("unknown accelerator", _edit(saturn_plan(), "q", accelerator="h100"),
     ("job q", "unknown accelerator 'h100'")),
    ("node overload", _edit(saturn_plan(), "q", start=30.0, end=130.0),
     ("node n0: 6 GPUs in use at t=30", "> 4 available", "p", "q")),
    ("not scheduled", saturn_plan()[:1], ("job q: not scheduled",)),
    ("twice", [*saturn_plan(), ScheduleEntry(job="q", start=200, end=300, node="n1", gpus=2,
                                             config="ddp")],
     ("job q: 2 schedule entries",)),
    ("unknown config", _edit(saturn_plan(), "q", config="zero3"),
     ("job q", "zero3 on 2 GPUs is not one of its configurations")),
    ("config with wrong gpus", _edit(saturn_plan(), "q", gpus=4),
     ("job q", "ddp on 4 GPUs is not one")),
    ("infeasible config", _edit(saturn_plan(), "q", config="pipeline", gpus=4, end=130.0),
     ("job q", "pipeline on 4 GPUs is infeasible")),
    ("wrong runtime", _edit(saturn_plan(), "q", end=161.0),
     ("job q: runs 101 s", "takes 100 s")),
    ("no config", _edit(saturn_plan(), "q", config=None), ("job q: no configuration",)),
    ("no node", _edit(saturn_plan(), "q", node=None), ("job q: no node given",)),
    ("no gpus", _edit(saturn_plan(), "q", gpus=0), ("job q", "0 GPUs")),
]


@pytest.mark.parametrize(
    ("plan", "needles"), [(p, n) for _, p, n in SATURN_CASES], ids=[c[0] for c in SATURN_CASES]
)
def test_schedule_violation_reported(
    saturn: Instance, plan: list[ScheduleEntry], needles: tuple[str, ...]
) -> None:
    reported(check(saturn, make_solution(saturn, schedule=plan)), *needles)


def test_runtime_tolerance_is_relative_plus_absolute(saturn: Instance) -> None:
    """q's 100 s runtime may be off by 1e-6 x 100 s + tol: 5e-5 s passes, 1e-3 s does not."""
    close = _edit(saturn_plan(), "q", end=160.0 + 5e-5)
    assert check(saturn, make_solution(saturn, schedule=close)) == []
    far = _edit(saturn_plan(), "q", end=160.0 + 1e-3)
    reported(check(saturn, make_solution(saturn, schedule=far)), "job q: runs 100.001 s")
    assert check(saturn, make_solution(saturn, schedule=far), tol=1e-2) == []


@pytest.fixture
def hare() -> Instance:
    """Two GPU types, one GPU each (no nodes); job h: 2 rounds of 2 tasks."""
    return instance_from_dict(
        {
            "cluster": {"accelerators": {"v100": {"count": 1}, "k80": {"count": 1}}},
            "jobs": [
                {"id": "h", "rounds": 2, "tasks_per_round": 2,
                 "task_seconds": {"v100": 1.0, "k80": 3.0}},
            ],
        }
    )


def hare_plan() -> list[ScheduleEntry]:
    """Round 0 on both GPUs, round 1 after its barrier at t = 3."""
    return [
        ScheduleEntry(job="h", start=0, end=1, accelerator="v100", round=0),
        ScheduleEntry(job="h", start=0, end=3, accelerator="k80", round=0),
        ScheduleEntry(job="h", start=3, end=4, accelerator="v100", round=1),
        ScheduleEntry(job="h", start=4, end=5, accelerator="v100", round=1),
    ]


def test_feasible_hare_schedule_reports_nothing(hare: Instance) -> None:
    assert check(hare, make_solution(hare, schedule=hare_plan())) == []


def _edit_at(plan: list[ScheduleEntry], i: int, **changes: Any) -> list[ScheduleEntry]:
    return [e.model_copy(update=changes) if n == i else e for n, e in enumerate(plan)]


HARE_CASES: list[tuple[str, list[ScheduleEntry], tuple[str, ...]]] = [
    ("barrier", _edit_at(hare_plan(), 2, start=2, end=3),
     ("job h: round 1 starts at 2 s before round 0 ends at 3 s",)),
    ("task count", hare_plan()[:3], ("job h: round 1 has 1 tasks, expected 2",)),
    ("missing round index", _edit_at(hare_plan(), 3, round=None), ("job h", "no round index")),
    ("round out of range", _edit_at(hare_plan(), 3, round=2), ("job h: round index 2",)),
    ("task too short", _edit_at(hare_plan(), 1, end=2), ("job h: task on k80 runs 2 s",)),
    ("type overload", _edit_at(hare_plan(), 3, start=3, end=4),
     ("accelerator v100: 2 GPUs in use at t=3", "> 1 available")),
    ("no type", _edit_at(hare_plan(), 0, accelerator=None), ("neither an accelerator",)),
]


@pytest.mark.parametrize(
    ("plan", "needles"), [(p, n) for _, p, n in HARE_CASES], ids=[c[0] for c in HARE_CASES]
)
def test_hare_violation_reported(
    hare: Instance, plan: list[ScheduleEntry], needles: tuple[str, ...]
) -> None:
    reported(check_schedule(hare, make_solution(hare, schedule=plan)), *needles)


def test_check_dispatches_to_every_part(gavel: Instance) -> None:
    """Allocation, rounds and schedule violations all surface through check()."""
    solution = make_solution(
        gavel,
        allocation={"a": {"v100": 1.5}},
        rounds=[[Placement(job="c", accelerator="k80", gpus=1)]],
        schedule=[ScheduleEntry(job="a", start=5, end=1, accelerator="v100")],
    )
    violations = check(gavel, solution)
    reported(violations, "job a on v100: share 1.5")
    reported(violations, "round 0: job c on k80: gang of 1")
    reported(violations, "job a: ends at 1")


# ------------------------------------------------------------- sweep vs brute force


intervals = st.lists(
    st.tuples(st.integers(0, 20), st.integers(0, 10), st.integers(1, 3)), max_size=8
)


@settings(max_examples=150, deadline=None)
@given(intervals, st.integers(1, 6))
def test_capacity_sweep_matches_brute_force(
    raw: list[tuple[int, int, int]], capacity: int
) -> None:
    """Overload reported iff at some start time the [start, end) intervals exceed capacity."""
    instance = instance_from_dict(
        {"cluster": {"accelerators": {"t4": {"count": capacity}}}, "jobs": [{"id": "j"}]}
    )
    plan = [ScheduleEntry(job="j", start=s, end=s + d, gpus=g) for s, d, g in raw]
    peak = max(
        (sum(e.gpus for e in plan if e.start <= t < e.end) for t in {e.start for e in plan}),
        default=0,
    )
    violations = check_schedule(instance, make_solution(instance, schedule=plan))
    assert bool(violations) == (peak > capacity), (violations, peak)
    if violations:
        reported(violations, f"accelerator t4: {peak} GPUs in use")


# ------------------------------------------------------------------------- objective


def gavel_shares(with_pair: bool) -> dict[str, Any]:
    """a: 1/2 V100; b: 1/4 V100 + 1/4 K80; c: all of K80; optionally a+b on V100 for 1/4."""
    pairs = [PairShare(jobs=("a", "b"), accelerator="v100", fraction=0.25)] if with_pair else []
    return {
        "allocation": {"a": {"v100": 0.5}, "b": {"v100": 0.25, "k80": 0.25}, "c": {"k80": 1.0}},
        "colocated_allocation": pairs,
    }


# By hand: T_eq = sum_k T[j,k] n_k / N with N = 6: a (4*2 + 1*4)/6 = 2, b (3*2 + 1.5*4)/6 = 2,
# c (2*4)/6 = 4/3.  Solo throughputs: a 4/2 = 2, b 3/4 + 1.5/4 = 1.125, c 2; the pair adds
# 2.5/4 to a and 2/4 to b.  Normalized s_j thr_j / (w_j T_eq[j]): a 1, b 0.5625, c 3 solo;
# a 1.3125, b 0.8125 with the pair.  Sum of throughputs (X only): 2 + 1.125 + 2 = 5.125.
GAVEL_OBJECTIVES = [
    ("gavel.max_min_fairness", False, 0.5625),
    ("gavel.max_min_fairness_packed", True, 0.8125),
    ("gavel.max_min_fairness", True, 0.8125),  # pair shares count whatever the name
    ("gavel.hierarchical", False, 0.5625),  # each job its own entity, weight 1
    ("gavel.max_sum_throughput", True, 5.125),
    ("gavel.fifo", False, 3.0),  # jobs holding some share
]


@pytest.mark.parametrize(("name", "with_pair", "expected"), GAVEL_OBJECTIVES)
def test_gavel_objective_rederived_by_hand(
    gavel: Instance, name: str, with_pair: bool, expected: float
) -> None:
    solution = make_solution(gavel, **gavel_shares(with_pair))
    derived = get_formulation(name).objective_of(gavel, solution)
    assert derived == pytest.approx(expected, rel=1e-12)
    solution.formulation = name
    solution.objective = expected
    assert check(gavel, solution) == []
    solution.objective = expected * 1.001
    reported(check(gavel, solution), f"objective: {name} claims", "gives")


# saturn_plan by hand: p ends at 60 s, q at 160 s: makespan 160; weighted completion with
# w_p = 3, w_q = 1: 3*60 + 160 = 340.
SATURN_OBJECTIVES = [
    ("saturn.time_indexed", 160.0),
    ("saturn.disjunctive", 160.0),
    ("saturn.greedy", 160.0),
    ("saturn.introspective", 160.0),
    ("saturn.time_indexed_wct", 340.0),
]


@pytest.mark.parametrize(("name", "expected"), SATURN_OBJECTIVES)
def test_saturn_objective_rederived_by_hand(saturn: Instance, name: str,
                                            expected: float) -> None:
    weighted = saturn.model_copy(update={"jobs": [
        saturn.jobs[0].model_copy(update={"weight": 3.0}), saturn.jobs[1]]})
    solution = make_solution(weighted, schedule=saturn_plan())
    assert get_formulation(name).objective_of(weighted, solution) == pytest.approx(expected)
    solution.formulation = name
    solution.objective = expected
    assert check(weighted, solution) == []
    solution.objective = expected - 1.0
    reported(check(weighted, solution), f"objective: {name} claims {expected - 1:g}",
             f"gives {expected:g}")


def test_objective_tolerance_is_relative(saturn: Instance) -> None:
    """Makespan 160 s may be claimed within 1e-6 x 160 s: +5e-5 s passes, +1e-3 s does not."""
    solution = make_solution(saturn, schedule=saturn_plan())
    solution.formulation = "saturn.greedy"
    solution.objective = 160.0 + 5e-5
    assert check(saturn, solution) == []
    solution.objective = 160.0 + 1e-3
    reported(check(saturn, solution), "claims 160.001 but")


def test_objective_not_compared_without_a_claim_a_solution_or_a_known_name(
    saturn: Instance,
) -> None:
    """No objective, a status without a solution, or an unregistered name: nothing compared."""
    plan = saturn_plan()
    unnamed = make_solution(saturn, schedule=plan, objective=1.0)  # formulation "test"
    assert check(saturn, unnamed) == []
    no_claim = make_solution(saturn, schedule=plan)
    no_claim.formulation = "saturn.greedy"
    assert check(saturn, no_claim) == []
    infeasible = no_claim.model_copy(update={"status": Status.INFEASIBLE, "objective": 1.0})
    assert check(saturn, infeasible) == []


def test_objective_infinities_and_nan(saturn: Instance) -> None:
    """A NaN claim never agrees; an infinite claim agrees only with the same infinity."""
    solution = make_solution(saturn, schedule=saturn_plan())
    solution.formulation = "saturn.greedy"
    for bad in (math.nan, math.inf):
        solution.objective = bad
        reported(check(saturn, solution), "objective: saturn.greedy claims", "gives 160")
