"""Every registered policy that the array engine runs gives the same per-job records under
it as under the per-job reference loop, on the first jobs of Gavel's trace-1000, with the
one-node pools placed by runs and coverage counts (``RUN_PLACEMENT_MIN_GPUS`` lowered so
that the 36-GPU pools take that path).  The whole trace, every policy, both engines, is
compared with records saved before each engine change by hand (docs/simulator.md)."""

from __future__ import annotations

import pytest
from test_simulator_streaming import assert_same_records

from schedlab.formulations.gavel import rounds
from schedlab.instance import load_instance
from schedlab.policies.registry import get_policy, policies
from schedlab.simulator import array_placement, simulate
from schedlab.simulator.array_run import can_run_arrays
from schedlab.simulator.engine import jobs_from_instance

TRACE = "instances/gavel/trace-1000.json.gz"
FIRST_JOBS = 50
#: policies outside the round engine's array path: one accelerator type only (Shockwave),
#: elastic tasks (Titan, run by simulate_elastic)
SKIP = ("shockwave", "titan")


def _names() -> list[str]:
    return [name for name in policies() if not name.startswith(SKIP)]


@pytest.fixture(scope="module")
def trace_start():  # type: ignore[no-untyped-def]
    instance = load_instance(TRACE)
    return instance.model_copy(update={"jobs": instance.jobs[:FIRST_JOBS]})


def test_array_engine_equals_the_reference_loop_on_trace_1000(
        trace_start, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # the runs path on the 36-GPU pools (the bit-mask path is what the hypothesis tests of
    # tests/test_simulator_arrays.py run at their pool sizes)
    monkeypatch.setattr(array_placement, "RUN_PLACEMENT_MIN_GPUS", 0)
    assert can_run_arrays(jobs_from_instance(trace_start), "schedlab")
    names = _names()
    assert len(names) >= 28  # every policy of the round engine but the two above
    for name in names:
        kw = {"round_s": trace_start.params.round_s, "keep_rounds": False}
        fast = simulate(trace_start, policy=get_policy(name), engine="arrays", **kw)
        slow = simulate(trace_start, policy=get_policy(name), engine="reference", **kw)
        assert_same_records(fast.jobs, slow.jobs)
        assert (fast.num_rounds, fast.num_job_rounds, fast.decisions) == (
            slow.num_rounds, slow.num_job_rounds, slow.decisions)


@pytest.mark.parametrize("name", ["gavel.max_min_fairness", "gavel.max_sum_throughput",
                                  "gavel.max_min_fairness_agnostic"])
def test_compiled_round_rule_equals_the_numpy_one(
        trace_start, monkeypatch: pytest.MonkeyPatch, name: str) -> None:  # type: ignore[no-untyped-def]
    """The round rule's compiled loops (the candidates' static order from the class LP's
    share ranks, the walk), used from 2000 active jobs on, give the records of its numpy
    and Python path: both forced on the trace's first jobs."""
    kw = {"round_s": trace_start.params.round_s, "keep_rounds": False}
    monkeypatch.setattr(rounds, "COMPILED_WALK_MIN_UNITS", 0)
    monkeypatch.setattr(rounds, "COMPILED_WALK", True)
    compiled = simulate(trace_start, policy=get_policy(name), **kw)
    monkeypatch.setattr(rounds, "COMPILED_WALK", False)
    plain = simulate(trace_start, policy=get_policy(name), **kw)
    assert_same_records(compiled.jobs, plain.jobs)
    assert (compiled.num_rounds, compiled.num_job_rounds) == (plain.num_rounds,
                                                              plain.num_job_rounds)
