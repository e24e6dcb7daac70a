"""Saturn introspective scheduling: a hand-derived case, sigma = 0 dominance over the static
plan, checker-clean realized schedules under noise, and the checker's segment rules."""

from __future__ import annotations

from typing import Any

import pytest

import schedlab
from schedlab.check import check
from schedlab.errors import InputError
from schedlab.formulations.saturn.data import saturn_data
from schedlab.formulations.saturn.introspective import Introspective, runtime_factors
from schedlab.formulations.saturn.models import TimeIndexed
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import InstanceRef, ScheduleEntry, Solution, Status
from schedlab.solvers import SolverOptions
from schedlab.workloads.saturn import random_saturn_instance


def introspective(**kwargs: Any) -> Introspective:
    form = Introspective(**kwargs)
    form.name = "saturn.introspective"
    return form


def two_gpu_instance() -> Instance:
    """One node x 2 GPUs.  X: single 1 GPU 100 s | ddp 2 GPUs 60 s.  Y: single 1 GPU 100 s."""
    return instance_from_dict({
        "name": "slow-x",
        "cluster": {"accelerators": {"a100": {"count": 2}},
                    "nodes": [{"name": "n0", "accelerator": "a100", "gpus": 2}]},
        "jobs": [
            {"id": "X", "configs": [{"technique": "single", "gpus": 1, "runtime_s": 100.0},
                                    {"technique": "ddp", "gpus": 2, "runtime_s": 60.0}]},
            {"id": "Y", "configs": [{"technique": "single", "gpus": 1, "runtime_s": 100.0}]},
        ],
    })


def test_scripted_slow_job_replanning_helps() -> None:
    """X's true runtime is 2x its estimate; interval 50 s, restart cost 10 s, threshold 1%.

    Plan on the estimates: X (1 GPU, 100 s) beside Y (1 GPU, 100 s): makespan 100 s, the
    unique optimum (X on 2 GPUs forces X and Y in series: 60 + 100 = 160 s).

    Static run: X really takes 200 s on 1 GPU, so the makespan is 200 s.

    Introspective run:

    * t = 50: X has done 50/200 = 1/4, so f_X = 2 is known; remaining estimates: X 150 s on
      1 GPU or 10 + 0.75 x 120 = 100 s on 2 GPUs; Y 50 s.  Keeping: max(50 + 150, 100) = 200.
      Best alternative: X on 2 GPUs after Y ends: 100 + 100 = 200 (X first: X ends at 150, Y
      resumes 150 + 10 + 50 = 210).  Nothing < 0.99 x 200: keep.
    * t = 100: Y is done, X has done 1/2; keep: 100 + 100 = 200; restart X on 2 GPUs:
      100 + 10 + 0.5 x 120 = 170 < 198: adopt.  X is checkpointed at 100.
    * t = 150: X (2 GPUs) has 20 s left; keep (170) is optimal.

    Realized: X [0, 100) single, X [100, 170) ddp (10 s restore + 60 s), Y [0, 100):
    makespan 170 s vs 200 s static; 3 re-solves, 1 adopted, 1 restart.  Coverage of X:
    100/200 + (70 - 10)/120 = 1.
    """
    inst = two_gpu_instance()
    sol = introspective(interval_s=50.0, restart_cost_s=10.0, threshold=0.01,
                        runtime_factors={"X": 2.0}).solve(inst)
    m = sol.metrics
    assert m["plan_makespan_s"] == pytest.approx(100.0)
    assert m["static_makespan_s"] == pytest.approx(200.0)
    assert sol.objective == pytest.approx(170.0) and m["makespan_s"] == pytest.approx(170.0)
    assert (m["resolves"], m["adopted"], m["restarts"]) == (3, 1, 1)
    assert [r["adopted"] for r in m["resolve_log"]] == [False, True, False]
    assert m["resolve_log"][1]["current_plan_s"] == pytest.approx(200.0)
    assert m["resolve_log"][1]["new_plan_s"] == pytest.approx(170.0)
    segments = sorted((e.job, e.round, e.start, e.end, e.config, e.gpus) for e in sol.schedule)
    assert segments == [
        ("X", 0, 0.0, pytest.approx(100.0), "single", 1),
        ("X", 1, pytest.approx(100.0), pytest.approx(170.0), "ddp", 2),
        ("Y", 0, 0.0, pytest.approx(100.0), "single", 1),
    ]
    assert check(inst, sol) == []
    assert sol.status == Status.FEASIBLE
    # the true lower bound: max(120, (200 + 100) / 2) = 150 s
    assert sol.bound == pytest.approx(150.0)


def test_without_introspection_when_the_interval_is_long() -> None:
    """An interval beyond the makespan: no re-solve, realized = static = 200 s."""
    inst = two_gpu_instance()
    sol = introspective(interval_s=1000.0, runtime_factors={"X": 2.0}).solve(inst)
    assert sol.metrics["resolves"] == 0
    assert sol.objective == pytest.approx(200.0) == sol.metrics["static_makespan_s"]
    assert check(inst, sol) == []


@pytest.mark.parametrize(("seed", "nodes"), [(0, 1), (2, 1), (3, 2)])
def test_sigma_zero_is_never_worse_than_static(seed: int, nodes: int) -> None:
    """With exact runtimes and free restarts, every adopted plan lowers the (exact) predicted
    makespan, so the introspective run ends no later than the static plan; a short time limit
    on the plan leaves room to improve."""
    inst = random_saturn_instance(6, nodes=nodes, gpus_per_node=4, seed=seed)
    options = SolverOptions(time_limit_s=0.2)
    static = TimeIndexed().solve(inst, options)
    sol = introspective(interval_s=1000.0, restart_cost_s=0.0, noise_sigma=0.0,
                        resolve_time_limit_s=0.2).run(inst, static, options)
    assert sol.objective is not None
    assert sol.objective <= sol.metrics["static_makespan_s"] + 1e-6
    assert check(inst, sol) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_noisy_realized_schedule_passes_the_checker(seed: int) -> None:
    inst = random_saturn_instance(6, nodes=2, gpus_per_node=4, seed=10 + seed)
    options = SolverOptions(time_limit_s=0.3)
    static = TimeIndexed().solve(inst, options)
    form = introspective(interval_s=800.0, noise_sigma=0.4, seed=seed, restart_cost_s=30.0,
                         threshold=0.0, resolve_time_limit_s=0.2)
    sol = form.run(inst, static, options)
    assert check(inst, sol) == []
    m = sol.metrics
    assert sol.objective == pytest.approx(max(e.end for e in sol.schedule))
    assert m["restarts"] == len(sol.schedule) - len(inst.jobs)
    assert sol.bound is not None and sol.bound <= sol.objective + 1e-6
    assert m["static_makespan_s"] >= sol.bound - 1e-6
    assert m["adopted"] <= m["resolves"]
    factors = runtime_factors(saturn_data(inst), 0.4, seed)
    assert list(m["runtime_factor"].values()) == factors
    assert factors != runtime_factors(saturn_data(inst), 0.4, seed + 1)


def test_registered_and_solvable_through_the_api() -> None:
    inst = two_gpu_instance()
    sol = schedlab.solve(inst, "saturn.introspective")
    assert sol.formulation == "saturn.introspective"
    assert sol.violations == [] and sol.status == Status.OPTIMAL  # sigma = 0, proven plan
    assert sol.objective == pytest.approx(100.0)


@pytest.mark.parametrize("bad", [{"interval_s": 0.0}, {"threshold": -0.1},
                                 {"restart_cost_s": -1.0}, {"noise_sigma": float("nan")}])
def test_bad_parameters_are_named(bad: dict[str, float]) -> None:
    with pytest.raises(InputError, match=next(iter(bad))):
        Introspective(**bad)


def test_unknown_job_in_runtime_factors() -> None:
    with pytest.raises(InputError, match="unknown jobs"):
        introspective(runtime_factors={"Z": 2.0}).solve(two_gpu_instance())


# ---------------------------------------------------------------- checker: segments


def segmented(entries: list[ScheduleEntry], **metrics: Any) -> Solution:
    return Solution(instance=InstanceRef(name="slow-x", hash="-"), formulation="test",
                    status=Status.FEASIBLE, schedule=entries, metrics=metrics)


def good_segments() -> list[ScheduleEntry]:
    return [
        ScheduleEntry(job="X", start=0, end=100, node="n0", gpus=1, config="single", round=0),
        ScheduleEntry(job="X", start=100, end=170, node="n0", gpus=2, config="ddp", round=1),
        ScheduleEntry(job="Y", start=0, end=100, node="n0", gpus=1, config="single", round=0),
    ]


TRUE = {"X": {"single:1": 200.0, "ddp:2": 120.0}, "Y": {"single:1": 100.0}}


def test_checker_accepts_covering_segments() -> None:
    inst = two_gpu_instance()
    assert check(inst, segmented(good_segments(), true_runtime_s=TRUE, restart_cost_s=10.0)) == []
    # without recorded true runtimes the estimates apply: X covers 100/100 + 60/60 = 2
    found = check(inst, segmented(good_segments(), restart_cost_s=10.0))
    assert any("job X: segments cover 2" in v for v in found)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"end": 160.0}, "job X: segments cover 0.916"),
        ({"start": 90.0, "end": 160.0}, "segment 1 starts at 90 s before segment 0 ends"),
        ({"round": 2}, "segment indices [0, 2]"),
        ({"round": None}, "some entries have a segment index"),
        ({"config": "fsdp"}, "fsdp on 2 GPUs is not one of its configurations"),
        ({"node": None}, "no node given"),
    ],
)
def test_checker_reports_bad_segments(change: dict[str, Any], needle: str) -> None:
    entries = good_segments()
    entries[1] = entries[1].model_copy(update=change)
    found = check(two_gpu_instance(),
                  segmented(entries, true_runtime_s=TRUE, restart_cost_s=10.0))
    assert any(needle in v for v in found), found


def test_checker_needs_a_recorded_true_runtime_for_the_segment_config() -> None:
    partial = {"X": {"single:1": 200.0}, "Y": {"single:1": 100.0}}
    found = check(two_gpu_instance(),
                  segmented(good_segments(), true_runtime_s=partial, restart_cost_s=10.0))
    assert any("no valid true runtime recorded for ddp on 2 GPUs" in v for v in found), found
