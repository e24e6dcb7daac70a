"""The elastic mode (schedlab.simulator.elastic): switches, elastic GPU counts, merged pairs
and fixed-gang policies, each against finish times derived by hand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from schedlab.instance import Instance, instance_from_dict
from schedlab.policies.elastic_state import ElasticState, Grant
from schedlab.policies.registry import get_policy
from schedlab.simulator.elastic import simulate_elastic
from schedlab.simulator.elastic_gangs import FixedGangs
from schedlab.simulator.engine import InvalidDecisionError
from schedlab.simulator.switch import SwitchModel

REL = 1e-9
#: switch of model "m": checkpoint 30 s + load 10 s (plain) or 2 s (pipelined), any GPUs
SWITCH = SwitchModel.from_table([("m", 1, 10.0, 2.0)], checkpoint_s=30.0)


def _instance(tasks: list[dict[str, Any]], gpus: int = 4, round_s: float = 120.0) -> Instance:
    jobs = []
    for t in tasks:
        job = {"id": t["id"], "arrival": t.get("arrival", 0.0), "base_model": t.get("model", "m"),
               "classes": t.get("classes", ["cat", "dog"]), "dataset": t.get("dataset", t["id"]),
               "duration_s": {str(a): s for a, s in t["profile"].items()},
               "scale_factor": t.get("gpus", 1), "total_steps": t.get("work", 1000.0)}
        jobs.append(job)
    return instance_from_dict({
        "schema": "schedlab/instance@1", "name": "hand",
        "cluster": {"accelerators": {"v100": {"count": gpus, "gpus_per_node": 4}}},
        "jobs": jobs, "params": {"round_s": round_s}})


class Scripted:
    """Grants what ``script(state)`` says; records the states it saw."""

    name = "scripted"

    def __init__(self, script: Callable[[ElasticState], list[Grant]],
                 pipelined_switch: bool = False) -> None:
        self.script = script
        self.pipelined_switch = pipelined_switch
        self.seen: list[ElasticState] = []

    def reset(self) -> None:
        self.seen = []

    def plan(self, state: ElasticState) -> list[Grant]:
        self.seen.append(state)
        return self.script(state)


def _every_round(*grants: Grant) -> Scripted:
    def script(state: ElasticState) -> list[Grant]:
        active = {m for u in state.units for m in u.members}
        return [g for g in grants if set(g.members) <= active]
    return Scripted(script)


def _finish(result: Any, task: str) -> float:
    return next(r.finish for r in result.jobs if r.job == task)


def test_first_start_pays_a_switch_then_runs_at_the_profile() -> None:
    # 600 s of work on 2 GPUs; round 1 pays 30 + 10 and runs 80 s; rounds 2-5 run 480 s;
    # the last 40 s in round 6: finish at 5 x 120 + 40 = 640 s
    inst = _instance([{"id": "a", "profile": {1: 1000.0, 2: 600.0}}])
    result = simulate_elastic(inst, _every_round(Grant(("a",), 2)), switch=SWITCH)
    assert _finish(result, "a") == pytest.approx(640.0, rel=REL)
    record = result.jobs[0]
    assert record.overhead_s == pytest.approx(40.0, rel=REL)
    assert record.gpu_seconds == pytest.approx(2 * 640.0, rel=REL)
    assert record.isolated_time_s == pytest.approx(1000.0, rel=REL)  # d(request = 1)
    assert record.migrations == 0 and record.preemptions == 0
    # the pipelined switch: 30 + 2 s, so 8 s earlier
    piped = simulate_elastic(inst, _every_round(Grant(("a",), 2)), switch=SWITCH,
                             pipelined=True)
    assert _finish(piped, "a") == pytest.approx(632.0, rel=REL)


def test_a_new_gpu_count_pays_again() -> None:
    # round 1 on 1 GPU: 80 s of 1000 -> 8% done; then 2 GPUs: 92% x 600 = 552 s of work,
    # round 2 pays 40 and runs 80 (80/600 done), rounds 3-6 run 480 s, 552 - 560 < 0:
    # left after round 2: 552 - 80 = 472 s -> rounds 3, 4, 5 (360 s), 112 s in round 6:
    # finish at 5 x 120 + 112 = 712 s
    inst = _instance([{"id": "a", "profile": {1: 1000.0, 2: 600.0}}])

    def script(state: ElasticState) -> list[Grant]:
        return [Grant(("a",), 1 if state.round_index == 0 else 2)]

    result = simulate_elastic(inst, Scripted(script), switch=SWITCH)
    assert _finish(result, "a") == pytest.approx(712.0, rel=REL)
    assert result.jobs[0].migrations == 1
    assert result.jobs[0].overhead_s == pytest.approx(80.0, rel=REL)


def test_waiting_forgets_nothing_but_resuming_pays_a_whole_switch() -> None:
    # round 0 runs (40 s switch, 80 s work), round 1 waits (a preemption), round 2 resumes
    # (40 s switch, 80 s work), ...: 1000 s of work on 1 GPU
    inst = _instance([{"id": "a", "profile": {1: 1000.0}}])

    def script(state: ElasticState) -> list[Grant]:
        return [] if state.round_index == 1 else [Grant(("a",), 1)]

    result = simulate_elastic(inst, Scripted(script), switch=SWITCH)
    # after round 0: 920 left; rounds 2..: 80 + 120 x 7 = 920 -> finish at round 9's end
    assert _finish(result, "a") == pytest.approx(10 * 120.0, rel=REL)
    assert result.jobs[0].preemptions == 1
    assert result.jobs[0].overhead_s == pytest.approx(80.0, rel=REL)


def test_an_overhead_longer_than_a_round_carries_over() -> None:
    # checkpoint 200 s: round 0 pays 120, round 1 pays 80 and runs 40 of 100 s, round 2 runs
    # the last 60: finish at 240 + 60 = 300 s
    long = SwitchModel.from_table([("m", 1, 0.0, 0.0)], checkpoint_s=200.0)
    inst = _instance([{"id": "a", "profile": {1: 100.0}}])
    result = simulate_elastic(inst, _every_round(Grant(("a",), 1)), switch=long)
    assert _finish(result, "a") == pytest.approx(300.0, rel=REL)
    assert result.jobs[0].overhead_s == pytest.approx(200.0, rel=REL)


def test_arrivals_wait_for_the_round_grid() -> None:
    # arrival at 50 s: admitted at 120 s; 100 s of work + 40 s switch: finish 260 s
    inst = _instance([{"id": "a", "arrival": 50.0, "profile": {1: 100.0}}])
    policy = _every_round(Grant(("a",), 1))
    result = simulate_elastic(inst, policy, switch=SWITCH)
    assert policy.seen[0].now == 120.0
    assert _finish(result, "a") == pytest.approx(260.0, rel=REL)
    assert result.jobs[0].jct == pytest.approx(210.0, rel=REL)


def test_a_merged_pair_runs_as_one_and_finishes_together() -> None:
    # the pair's profile (the truth given here) {1: 500, 2: 300}: 2 GPUs, 40 s switch, 300 s:
    # finish at 340 s for both; GPU-seconds 2 x 340 split in halves
    inst = _instance([{"id": "a", "profile": {1: 400.0}}, {"id": "b", "profile": {1: 300.0}}])

    def merged(first: Any, second: Any) -> dict[int, float]:
        assert (first.id, second.id) == ("a", "b")
        return {1: 500.0, 2: 300.0}

    policy = _every_round(Grant(("b", "a"), 2))
    result = simulate_elastic(inst, policy, switch=SWITCH, merged_profile=merged)
    assert _finish(result, "a") == pytest.approx(340.0, rel=REL)
    assert _finish(result, "b") == pytest.approx(340.0, rel=REL)
    for record in result.jobs:
        assert record.gpu_seconds == pytest.approx(340.0, rel=REL)
        assert record.start == 0.0
    # the second round sees one unit, the pair, keeping its GPUs (no new switch)
    pair = policy.seen[1].units
    assert [u.members for u in pair] == [("a", "b")] and pair[0].max_gpus == 2
    assert result.jobs[0].overhead_s == pytest.approx(40.0, rel=REL)
    runs = result.rounds[0].runs
    assert {(r.job, r.partner) for r in runs} == {("a", "b"), ("b", "a")}


@pytest.mark.parametrize(("grants", "message"), [
    ([Grant(("a",), 5)], "at most 4 GPUs"),
    ([Grant(("a",), 3), Grant(("b",), 3)], "6 GPUs granted but the cluster has 4"),
    ([Grant(("zz",), 1)], "unknown or not active"),
    ([Grant(("a",), 1), Grant(("a",), 1)], "granted twice"),
    ([Grant(("a",), 0)], "positive integer"),
    ([Grant(("a", "c"), 2)], "different base models"),
    ([Grant(("a", "a"), 2)], "two different tasks"),
])
def test_invalid_grants_name_the_problem(grants: list[Grant], message: str) -> None:
    inst = _instance([{"id": "a", "profile": {1: 400.0, 4: 100.0}},
                      {"id": "b", "profile": {1: 300.0, 4: 100.0}},
                      {"id": "c", "model": "n", "profile": {1: 300.0}}])
    switch = SwitchModel.from_table([("m", 1, 10.0, 2.0), ("n", 1, 1.0, 1.0)])
    with pytest.raises(InvalidDecisionError, match=message):
        simulate_elastic(inst, Scripted(lambda state: list(grants)), switch=switch)


def test_started_tasks_never_merge_and_members_run_only_as_a_pair() -> None:
    inst = _instance([{"id": "a", "profile": {1: 4000.0}}, {"id": "b", "profile": {1: 3000.0}}])

    def started(state: ElasticState) -> list[Grant]:
        return [Grant(("a",), 1)] if state.round_index == 0 else [Grant(("a", "b"), 2)]

    with pytest.raises(InvalidDecisionError, match="task 'a' has started"):
        simulate_elastic(inst, Scripted(started), switch=SWITCH)

    def alone(state: ElasticState) -> list[Grant]:
        return [Grant(("a", "b"), 2)] if state.round_index == 0 else [Grant(("a",), 1)]

    with pytest.raises(InvalidDecisionError, match="runs in merged pair"):
        simulate_elastic(inst, Scripted(alone), switch=SWITCH)


def test_srtf_runs_in_titans_world_by_hand() -> None:
    # one GPU, a (1000 s) and b (300 s) at 0: SRTF runs b first: 40 s switch + 300 = 340 s;
    # a starts at the next round (360 s): 40 + 1000 -> 1400 s
    inst = _instance([{"id": "a", "profile": {1: 1000.0}}, {"id": "b", "profile": {1: 300.0}}],
                     gpus=1)
    result = simulate_elastic(inst, FixedGangs(get_policy("srtf")), switch=SWITCH)
    assert _finish(result, "b") == pytest.approx(340.0, rel=REL)
    assert _finish(result, "a") == pytest.approx(1400.0, rel=REL)
    assert result.policy == "srtf"


def test_fixed_gangs_show_tiresias_its_gpu_seconds() -> None:
    # Tiresias (one queue threshold at 100 GPU-s): a job over it drops below a new arrival.
    inst = _instance([{"id": "a", "profile": {1: 1000.0}},
                      {"id": "b", "arrival": 130.0, "profile": {1: 1000.0}}], gpus=1)
    from schedlab.policies.tiresias import Tiresias

    wrapped = FixedGangs(Tiresias(thresholds_gpu_s=(100.0,)))
    result = simulate_elastic(inst, wrapped, switch=SWITCH)
    # a runs round 0 (120 GPU-s > 100: queue 1); b arrives, admitted at 240 s (round 2),
    # a keeps round 1 (b not there yet); at 240 s b (queue 0) preempts a.
    b_start = next(r.start for r in result.jobs if r.job == "b")
    assert b_start == 240.0
    assert next(r.preemptions for r in result.jobs if r.job == "a") >= 1
