"""The list-schedule decoder and late-acceptance search of ``saturn.list_search``.

The decoder is checked against ``NodeTimeline`` (the package's separate serial-schedule code):
for every job in list order, its start and node must be the earliest end over the nodes that
fit.  Searched schedules are checked by the independent checker and against the brute-force
enumerator of ``test_saturn``; the time-indexed solve's ``stop_gap`` keeps the status honest.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_saturn import brute_force_makespan, make

from schedlab.check import check
from schedlab.errors import InputError
from schedlab.formulations.saturn.baselines import (
    greedy_placements,
    schedule_solution,
    to_schedule,
)
from schedlab.formulations.saturn.data import NodeTimeline, makespan, saturn_data
from schedlab.formulations.saturn.list_search import decode_list, list_arrays, list_search
from schedlab.formulations.saturn.models import TimeIndexed
from schedlab.instance import Instance
from schedlab.solution import Status
from schedlab.solvers import SolverOptions
from schedlab.workloads.saturn import random_saturn_instance

FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def random_instance(rng: random.Random, jobs: int, nodes: list[int]) -> Instance:
    """Jobs with 1-3 configurations (1/2/4/8 GPUs that fit some node), runtimes at 0.1 s
    resolution and releases in {0, 50, 100} s."""
    sizes = [g for g in (1, 2, 4, 8) if g <= max(nodes)]
    out: list[dict[str, Any]] = []
    for j in range(jobs):
        configs = [{"technique": "ddp", "gpus": g, "runtime_s": rng.randint(200, 4000) / 10}
                   for g in rng.sample(sizes, rng.randint(1, min(3, len(sizes))))]
        out.append({"id": f"j{j}", "configs": configs, "arrival": rng.choice([0, 50, 100])})
    return make(out, nodes)


@FAST
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 9))
def test_decoder_places_like_node_timeline(seed: int, jobs: int) -> None:
    rng = random.Random(seed)
    inst = random_instance(rng, jobs, [8, 4])
    data = saturn_data(inst)
    order = list(range(data.num_jobs))
    rng.shuffle(order)
    pick = [rng.randrange(len(opts)) for opts in data.options]
    span, placed = decode_list(data, list_arrays(data), order, pick)
    where = {j: (node, start) for j, _, node, start in placed}
    timeline = NodeTimeline(data.nodes)
    expected_span = 0.0
    for j in order:
        option = data.options[j][pick[j]]
        ends = []
        for node in data.nodes:
            if option.gpus <= node.gpus:
                t = timeline.earliest(node.name, option.gpus, option.runtime, data.release[j])
                ends.append((t + option.runtime, data.nodes.index(node), t))
        end, n, t = min(ends)  # earliest end, ties to the lower node index
        node, start = where[j]
        assert node == data.nodes[n]
        assert start == pytest.approx(t, rel=1e-9, abs=1e-9)
        timeline.place(node.name, option.gpus, t, option.runtime)
        expected_span = max(expected_span, end)
    assert span == pytest.approx(expected_span, rel=1e-9)


def test_searched_schedules_pass_the_checker_and_are_never_longer() -> None:
    inst = random_saturn_instance(14, nodes=2, gpus_per_node=8, seed=3)
    data = saturn_data(inst)
    start = greedy_placements(data)
    start_span = makespan(to_schedule(data, start))
    found = list_search(data, start, math.inf, max_iterations=60_000, seed=1)
    assert found.makespan <= start_span + 1e-9
    schedule = to_schedule(data, found.placements)
    assert makespan(schedule) == pytest.approx(found.makespan, rel=1e-9)
    solution = schedule_solution("saturn.time_indexed", inst, data, schedule)
    assert check(inst, solution) == []
    # the improvements are logged in decreasing order, the last one is the result
    values = [v for _, v in found.log]
    assert values == sorted(values, reverse=True)
    if values:
        assert values[-1] == pytest.approx(found.makespan, rel=1e-9)


@pytest.mark.parametrize("seed", range(0, 60, 5))
@pytest.mark.parametrize("weights", [(0.0, 0.0), (0.1, 0.15)])
def test_search_on_one_node_reaches_the_brute_force_optimum(
        seed: int, weights: tuple[float, float]) -> None:
    """On one node the decoder's lists (every order, every option) reach every active
    schedule, so the brute-force optimum is reachable; with restarts after 2 000 idle steps
    (each from the best list, accepting up to 2% longer lists at first) 30 000 steps find it
    on these 2-5 job instances, with the makespan alone as the cost and with the default
    tie-breaking terms.  Deterministic: no deadline, fixed seeds."""
    rng = random.Random(seed)
    inst = random_instance(rng, 2 + seed % 4, [4])
    inst = make([{"id": j.id, "configs": [c.model_dump() for c in j.configs or []]}
                 for j in inst.jobs], [4])  # one release time: the enumerator starts at 0
    data = saturn_data(inst)
    end_weight, energy_weight = weights
    found = list_search(data, greedy_placements(data), math.inf, max_iterations=30_000,
                        stall_iterations=2_000, chunk=1_000, end_weight=end_weight,
                        energy_weight=energy_weight)
    assert found.makespan == pytest.approx(brute_force_makespan(inst), rel=1e-9)


def test_stop_gap_stops_early_and_keeps_the_status_honest() -> None:
    """A stop gap of 90% is met by the first schedules (the greedy one is within a factor
    2 here): the list search and the Benders phase are skipped, and the status is
    ``optimal`` only if the gap from the bound happens to be within the MIP tolerance."""
    inst = random_saturn_instance(8, nodes=2, gpus_per_node=8, seed=5)
    solution = TimeIndexed(stop_gap=0.9).solve(inst, SolverOptions(time_limit_s=20))
    assert solution.objective is not None and solution.bound is not None
    assert solution.gap == pytest.approx(
        (solution.objective - solution.bound) / solution.objective, rel=1e-9, abs=1e-12)
    assert solution.gap <= 0.9
    assert "list_search_iterations" not in solution.metrics
    assert "benders_iterations" not in solution.metrics
    if solution.gap > 1e-4:  # stopped by the stop gap: done, not proven
        assert solution.status == Status.FEASIBLE
    else:
        assert solution.status == Status.OPTIMAL
    assert check(inst, solution) == []


def test_stop_gap_is_validated() -> None:
    with pytest.raises(InputError, match="stop_gap"):
        TimeIndexed(stop_gap=1.5)
    with pytest.raises(InputError, match="list_first_share"):
        TimeIndexed(list_first_share=1.5)
    with pytest.raises(InputError, match="list_first_restarts"):
        TimeIndexed(list_first_restarts=-1)


def test_list_first_phase_keeps_bound_and_status_honest() -> None:
    """With a stop gap and no Benders phase, the list search runs before any grid model
    (phase 0 of ``TimeIndexed.solve``) and may end the solve.  On 4-job one-node instances
    (one release time, so the brute-force enumerator of ``test_saturn`` gives the optimum):
    the bound is never above that optimum, the schedule never below it and it passes the
    checker, the gap is the one of the bound, ``optimal`` only at the optimum, and a solve
    that ended in phase 0 is within the stop gap."""
    ended_in_phase_0 = 0
    for seed in range(8):
        rng = random.Random(seed)
        inst = random_instance(rng, 4, [4])
        inst = make([{"id": j.id, "configs": [c.model_dump() for c in j.configs or []]}
                     for j in inst.jobs], [4])
        optimum = brute_force_makespan(inst)
        solution = TimeIndexed(benders=False, stop_gap=0.05).solve(
            inst, SolverOptions(time_limit_s=1))
        assert check(inst, solution) == []
        assert solution.objective is not None and solution.bound is not None
        assert solution.bound <= optimum * (1 + 1e-9)
        assert solution.objective >= optimum * (1 - 1e-9)
        assert solution.gap == pytest.approx(
            (solution.objective - solution.bound) / solution.objective, rel=1e-9, abs=1e-12)
        if solution.status == Status.OPTIMAL:
            assert solution.objective == pytest.approx(optimum, rel=1e-4)
        if solution.metrics.get("grid_model") == "not built":
            ended_in_phase_0 += 1
            assert solution.gap <= 0.05
            assert solution.status in (Status.FEASIBLE, Status.OPTIMAL)
    assert ended_in_phase_0 > 0
