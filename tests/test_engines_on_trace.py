"""Every registered policy that the array engine runs gives the same per-job records under
it as under the per-job reference loop, on the first jobs of Gavel's trace-1000, with the
one-node pools placed by runs and coverage counts (``RUN_PLACEMENT_MIN_GPUS`` lowered so
that the 36-GPU pools take that path).  The whole trace, every policy, both engines, is
compared with records saved before each engine change by hand (docs/simulator.md)."""

from __future__ import annotations

import pytest
from test_simulator_streaming import assert_same_records

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
