"""Saturn SPASE MILPs against an independent brute-force enumerator, plus properties.

The enumerator (written here, sharing no code with the package) tries every configuration,
node and order, and places jobs one by one at their earliest feasible start on their node
(serial schedule generation).  For a regular objective such as makespan the serial scheme over
all orders and modes reaches every *active* schedule, and an optimal schedule can always be
left-shifted into an active one, so the best schedule it finds is optimal.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedlab
from schedlab.check import check
from schedlab.errors import InputError
from schedlab.instance import Instance, instance_from_dict
from schedlab.registry import get_formulation

SATURN = [
    "saturn.time_indexed",
    "saturn.disjunctive",
    "saturn.greedy",
    "saturn.current_practice",
    "saturn.random",
]


def make(jobs: list[dict[str, Any]], nodes: list[int]) -> Instance:
    return instance_from_dict(
        {
            "name": "s",
            "cluster": {
                "accelerators": {"a100": {"count": sum(nodes)}},
                "nodes": [
                    {"name": f"n{i}", "accelerator": "a100", "gpus": g} for i, g in enumerate(nodes)
                ],
            },
            "jobs": jobs,
        }
    )


def brute_force_makespan(inst: Instance) -> float:
    """Best makespan over all (config, node) choices and orders, serial earliest-start."""
    nodes = [(n.name, n.gpus) for n in inst.cluster.nodes or []]
    choices = []
    for job in inst.jobs:
        opts = [
            (c.gpus, c.runtime_s, name, cap)
            for c in job.configs or []
            if c.feasible
            for name, cap in nodes
            if c.gpus <= cap
        ]
        choices.append(opts)
    best = float("inf")
    for pick in itertools.product(*choices):
        for order in itertools.permutations(range(len(inst.jobs))):
            busy: dict[str, list[tuple[float, float, int]]] = {name: [] for name, _ in nodes}
            end_all = 0.0
            for j in order:
                gpus, runtime, node, cap = pick[j]
                times = sorted({0.0} | {e for _, e, _ in busy[node]})
                for t in times:
                    events = {t} | {s for s, _, _ in busy[node] if t < s < t + runtime}
                    peak = max(
                        sum(g for s, e, g in busy[node] if s <= p < e) for p in events
                    )
                    if peak + gpus <= cap:
                        break
                busy[node].append((t, t + runtime, gpus))
                end_all = max(end_all, t + runtime)
            best = min(best, end_all)
    return best


@st.composite
def saturn_instances(draw: st.DrawFn, max_jobs: int = 4) -> Instance:
    """Small instances with runtimes that are multiples of 10 s (grid-aligned)."""
    two_nodes = draw(st.booleans())
    nodes = [4, 2] if two_nodes else [4]
    num_jobs = draw(st.integers(1, 3 if two_nodes else max_jobs))
    jobs = []
    for j in range(num_jobs):
        base = draw(st.integers(3, 20)) * 10
        configs = []
        for g in draw(st.sets(st.sampled_from([1, 2, 4]), min_size=1, max_size=3)):
            speedup = draw(st.sampled_from([1.0, 1.5, 2.0, 3.0]))
            runtime = max(10, round(base / min(speedup, g) / 10) * 10)
            configs.append({"technique": "ddp", "gpus": g, "runtime_s": float(runtime)})
        if draw(st.booleans()):  # a slower technique on some GPU count (dominated)
            slow = dict(configs[0], technique="fsdp", runtime_s=configs[0]["runtime_s"] + 20)
            configs.append(slow)
        jobs.append({"id": f"j{j}", "configs": configs})
    return make(jobs, nodes)


FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(inst=saturn_instances())
def test_milps_match_brute_force(inst: Instance) -> None:
    expected = brute_force_makespan(inst)
    ti = get_formulation("saturn.time_indexed", slot_s=10).solve(inst)
    dj = schedlab.solve(inst, "saturn.disjunctive")
    assert ti.objective == pytest.approx(expected, abs=1e-6)
    assert dj.objective == pytest.approx(expected, abs=1e-6)
    assert ti.status == "optimal" and dj.status == "optimal"
    assert check(inst, ti) == [] and check(inst, dj) == []


@FAST
@given(inst=saturn_instances())
def test_dominance_reduction_keeps_the_optimum(inst: Instance) -> None:
    full = get_formulation("saturn.disjunctive", dominance=False).solve(inst)
    reduced = get_formulation("saturn.disjunctive", dominance=True).solve(inst)
    assert full.objective == pytest.approx(reduced.objective, abs=1e-6)


@FAST
@given(inst=saturn_instances())
def test_properties_of_every_saturn_formulation(inst: Instance) -> None:
    results = {name: schedlab.solve(inst, name) for name in SATURN}
    milp = results["saturn.time_indexed"].objective
    for name, sol in results.items():
        assert check(inst, sol) == [], name
        assert sol.objective is not None and sol.bound is not None
        assert sol.objective >= sol.bound - 1e-6, name  # makespan >= lower bound
        assert milp is not None and milp <= sol.objective + 1e-6, name  # MILP <= baselines


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_time_indexed_within_grid_error_of_disjunctive(seed: int) -> None:
    """Arbitrary runtimes: the disjunctive model is exact in continuous time, the grid model
    rounds each runtime up by < delta.  Stated bound: TI <= DJ + J * delta (each job of a
    chain can lose at most one slot), and DJ <= TI (DJ is the exact optimum)."""
    rng = random.Random(seed)
    jobs = []
    for j in range(3):
        base = rng.uniform(50, 300)
        jobs.append({"id": f"j{j}", "configs": [
            {"technique": "ddp", "gpus": g, "runtime_s": base / g ** rng.uniform(0.5, 0.9)}
            for g in (1, 2, 4)
        ]})
    inst = make(jobs, [4])
    ti = schedlab.solve(inst, "saturn.time_indexed")
    dj = schedlab.solve(inst, "saturn.disjunctive")
    assert ti.objective is not None and dj.objective is not None
    delta = ti.metrics["slot_s"]
    assert dj.objective <= ti.objective + 1e-6
    # The bound from the rounded-down grid is a valid bound of the exact optimum.
    assert ti.bound is not None and ti.bound <= dj.objective + 1e-6
    # optimal = within the default target_gap (relative 1e-4) of a valid bound
    assert ti.status != "optimal" or ti.objective <= ti.bound * (1 + 1e-4) + 1e-6
    assert ti.status != "optimal" or ti.objective <= dj.objective * (1 + 1e-4) + 1e-6
    assert ti.objective <= dj.objective + len(jobs) * delta + 1e-6


def test_hand_checked_three_jobs() -> None:
    """One node of 4 GPUs.  a: 4 GPUs for 100 s or 2 GPUs for 150 s; b and c: 2 GPUs 100 s.

    a on 4 GPUs holds the whole node for 100 s, and b, c need 100 s side by side: >= 200 s,
    reached by b, c in [0, 100) and a in [100, 200).  a on 2 GPUs for 150 s leaves 2 GPUs
    while it runs, enough for only one of b, c at a time: if a starts at 0, b and c run one
    after the other on the free pair (200 s); if a starts later than 0 while b, c overlap
    first, a ends at >= 100 + 150 = 250 s.  So the optimum is 200 s."""
    jobs = [
        {"id": "a", "configs": [
            {"technique": "fsdp", "gpus": 4, "runtime_s": 100},
            {"technique": "fsdp", "gpus": 2, "runtime_s": 150},
        ]},
        {"id": "b", "configs": [{"technique": "ddp", "gpus": 2, "runtime_s": 100}]},
        {"id": "c", "configs": [{"technique": "ddp", "gpus": 2, "runtime_s": 100}]},
    ]
    inst = make(jobs, [4])
    assert brute_force_makespan(inst) == pytest.approx(200.0)
    for name in ("saturn.time_indexed", "saturn.disjunctive"):
        sol = schedlab.solve(inst, name)
        assert sol.objective == pytest.approx(200.0), name
        assert check(inst, sol) == []


def test_time_limit_returns_a_feasible_schedule_with_gap() -> None:
    rng = random.Random(7)
    jobs = []
    for j in range(24):
        base = rng.uniform(100, 2000)
        jobs.append({"id": f"j{j}", "configs": [
            {"technique": "ddp", "gpus": g, "runtime_s": base / g ** rng.uniform(0.5, 0.95)}
            for g in (1, 2, 4, 8)
        ]})
    inst = make(jobs, [8, 8])
    sol = schedlab.solve(inst, "saturn.disjunctive", time_limit=1)
    assert sol.status == "time_limit"
    assert sol.gap is not None and sol.gap > 0
    assert check(inst, sol) == [] and len(sol.schedule) == 24


def test_weighted_completion_objective() -> None:
    """Two 1-GPU jobs on one 1-GPU node, runtimes 10 and 30, weights 3 and 1: Smith's rule
    (w/p descending) runs the short heavy job first: 3*10 + 1*40 = 70 (other order 3*40 + 30 =
    150)."""
    jobs = [
        {"id": "heavy", "weight": 3, "configs": [{"technique": "single", "gpus": 1,
                                                  "runtime_s": 10}]},
        {"id": "light", "weight": 1, "configs": [{"technique": "single", "gpus": 1,
                                                  "runtime_s": 30}]},
    ]
    inst = make(jobs, [1])
    sol = get_formulation("saturn.time_indexed_wct", slot_s=10).solve(inst)
    assert sol.objective == pytest.approx(70.0)
    assert check(inst, sol) == []


def test_bad_saturn_input_names_the_job() -> None:
    no_feasible = make(
        [{"id": "x", "configs": [{"technique": "ddp", "gpus": 1, "runtime_s": 5,
                                  "feasible": False}]}], [4])
    with pytest.raises(InputError, match="job x has no feasible configuration"):
        schedlab.solve(no_feasible, "saturn.time_indexed")
    too_big = make([{"id": "y", "configs": [{"technique": "ddp", "gpus": 16, "runtime_s": 5}]}],
                   [8])
    with pytest.raises(InputError, match=r"job y.*16 GPUs.*largest node has 8"):
        schedlab.solve(too_big, "saturn.disjunctive")
    with pytest.raises(InputError, match=r"jobs\[0\]\.configs\[0\]\.runtime_s"):
        make([{"id": "z", "configs": [{"technique": "ddp", "gpus": 1, "runtime_s": -5}]}], [8])
    with pytest.raises(InputError, match=r"jobs\[0\]\.configs"):
        schedlab.solve(make([{"id": "w"}], [8]), "saturn.greedy")
