"""Saturn introspective scheduling: a hand-derived case, sigma = 0 dominance over the static
plan, checker-clean realized schedules under noise, honest statuses, and the checker's segment
rules (the truth - runtime factors and restart cost - read from the instance)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import schedlab
from schedlab.check import check
from schedlab.errors import InputError
from schedlab.formulations.saturn import introspection_policy
from schedlab.formulations.saturn.introspective import Introspective
from schedlab.formulations.saturn.models import TimeIndexed
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import InstanceRef, ScheduleEntry, Solution, Status
from schedlab.solvers import SolveResult, SolverOptions
from schedlab.workloads.saturn import (
    model_selection_instance,
    random_saturn_instance,
    with_restart_cost,
    with_runtime_factors,
    with_runtime_noise,
)


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


def slow_x(restart_cost_s: float = 10.0) -> Instance:
    """The two-GPU instance in which X really takes 2x its estimates."""
    return with_restart_cost(with_runtime_factors(two_gpu_instance(), {"X": 2.0}),
                             restart_cost_s)


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
    inst = slow_x()
    sol = introspective(interval_s=50.0, threshold=0.01).solve(inst)
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
    assert sol.instance.hash == inst.content_hash()
    # judged by the estimates (no factor, no restart cost) X would be covered 2 times over
    assert any("job X: segments cover 2" in v for v in check(two_gpu_instance(), sol))
    assert sol.status == Status.FEASIBLE
    # the true lower bound: max(120, (200 + 100) / 2) = 150 s
    assert sol.bound == pytest.approx(150.0)


def test_without_introspection_when_the_interval_is_long() -> None:
    """An interval beyond the makespan: no re-solve, realized = static = 200 s."""
    inst = slow_x(60.0)
    sol = introspective(interval_s=1000.0).solve(inst)
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
    assert inst.params.restart_cost_s is None  # restarts are free
    sol = introspective(interval_s=1000.0, resolve_time_limit_s=0.2).run(inst, static, options)
    assert sol.objective is not None
    assert sol.objective <= sol.metrics["static_makespan_s"] + 1e-6
    assert check(inst, sol) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_noisy_realized_schedule_passes_the_checker(seed: int) -> None:
    inst = random_saturn_instance(6, nodes=2, gpus_per_node=4, seed=10 + seed)
    options = SolverOptions(time_limit_s=0.3)
    static = TimeIndexed().solve(inst, options)
    realized = with_restart_cost(with_runtime_noise(inst, 0.4, seed), 30.0)
    form = introspective(interval_s=800.0, threshold=0.0, resolve_time_limit_s=0.2)
    sol = form.run(realized, static, options)
    assert check(realized, sol) == []
    assert sol.instance.hash == realized.content_hash()
    # the same segments do not cover the jobs at the estimated runtimes
    assert any("segments cover" in v for v in check(inst, sol))
    m = sol.metrics
    assert sol.objective == pytest.approx(max(e.end for e in sol.schedule))
    assert m["restarts"] == len(sol.schedule) - len(inst.jobs)
    assert sol.bound is not None and sol.bound <= sol.objective + 1e-6
    assert m["static_makespan_s"] >= sol.bound - 1e-6
    assert m["adopted"] <= m["resolves"]


def test_registered_and_solvable_through_the_api() -> None:
    inst = two_gpu_instance()
    sol = schedlab.solve(inst, "saturn.introspective")
    assert sol.formulation == "saturn.introspective"
    assert sol.violations == [] and sol.status == Status.OPTIMAL  # sigma = 0, proven plan
    assert sol.objective == pytest.approx(100.0)


class StubSolver:
    """Stands in for the re-solves' solver: returns ``status`` without solving (the model's
    variables keep their warm start, i.e. the current plan on the grid)."""

    status = Status.ERROR

    def __init__(self, options: SolverOptions) -> None:
        self.options = options

    def solve(self, model: Any) -> SolveResult:
        return SolveResult(status=self.status, objective=None, bound=None, gap=None,
                           solve_s=0.0)


@pytest.mark.parametrize("resolve_status", [Status.ERROR, Status.TIME_LIMIT])
def test_unproven_resolves_do_not_become_optimal(
    monkeypatch: pytest.MonkeyPatch, resolve_status: Status
) -> None:
    """Exact runtimes and a proven static plan (X || Y, 100 s): the realized run is that plan,
    but re-solves that failed or hit their limit leave the status below optimal."""
    monkeypatch.setattr(StubSolver, "status", resolve_status)
    monkeypatch.setattr(introspection_policy, "PersistentSolver", StubSolver)
    sol = introspective(interval_s=25.0).solve(two_gpu_instance())
    assert sol.objective == pytest.approx(100.0)
    assert sol.metrics["plan_status"] == "optimal" and sol.metrics["resolves"] == 3
    assert sol.metrics["adopted"] == 0
    if resolve_status == Status.ERROR:
        assert sol.status == Status.FEASIBLE
        assert len(sol.diagnostics) == 3 and "current plan was kept" in sol.diagnostics[0]
    else:
        assert sol.status == Status.TIME_LIMIT and sol.diagnostics == []


@pytest.mark.parametrize("bad", [{"interval_s": 0.0}, {"threshold": -0.1},
                                 {"resolve_mip_gap": float("nan")}, {"max_slots": 0}])
def test_bad_parameters_are_named(bad: dict[str, float]) -> None:
    with pytest.raises(InputError, match=next(iter(bad))):
        Introspective(**bad)


def test_bad_truth_is_named() -> None:
    inst = two_gpu_instance()
    with pytest.raises(InputError, match="restart cost"):
        with_restart_cost(inst, -1.0)
    with pytest.raises(InputError, match="sigma"):
        with_runtime_noise(inst, float("nan"), 0)
    with pytest.raises(InputError, match="unknown jobs"):
        with_runtime_factors(inst, {"Z": 2.0})
    with pytest.raises(InputError, match="> 0"):
        with_runtime_factors(inst, {"X": 0.0})


# ---------------------------------------------------------------- truth in the instance


@pytest.mark.parametrize(("sigma", "seed"), [(0.2, 0), (0.4, 7)])
def test_with_runtime_noise_draws_lognormal_factors_in_job_order(sigma: float, seed: int) -> None:
    """f_j = exp(N(0, sigma^2)) drawn in job order from a PCG64 generator seeded with
    ``seed`` (computed here with Generator.normal, the scale applied by numpy), written into
    ``runtime_factor``; the estimates stay as they were."""
    inst = random_saturn_instance(9, nodes=1, gpus_per_node=4, seed=3)
    noisy = with_runtime_noise(inst, sigma, seed)
    draws = np.random.Generator(np.random.PCG64(seed)).normal(0.0, sigma, size=9)
    expected = [float(np.exp(v)) for v in draws]
    assert [job.runtime_factor for job in noisy.jobs] == pytest.approx(expected, rel=1e-12)
    assert [job.configs for job in noisy.jobs] == [job.configs for job in inst.jobs]
    assert all(job.runtime_factor is None for job in inst.jobs)  # the input is not changed
    assert noisy.content_hash() != inst.content_hash()
    assert [j.runtime_factor for j in with_runtime_noise(inst, sigma, seed + 1).jobs] != [
        j.runtime_factor for j in noisy.jobs]
    exact = with_runtime_noise(noisy, 0.0, seed)
    assert [job.runtime_factor for job in exact.jobs] == [1.0] * 9


def test_generators_write_the_truth() -> None:
    """``runtime_noise`` / ``runtime_seed`` / ``restart_cost_s`` of the generators are
    with_runtime_noise + with_restart_cost of the plain instance (runtime_seed None = seed)."""
    plain = random_saturn_instance(5, nodes=1, gpus_per_node=4, seed=2)
    made = random_saturn_instance(5, nodes=1, gpus_per_node=4, seed=2, runtime_noise=0.3,
                                  restart_cost_s=45.0)
    assert made == with_restart_cost(with_runtime_noise(plain, 0.3, 2), 45.0)
    assert made.params.restart_cost_s == 45.0
    grid = model_selection_instance(learning_rates=(1e-5,), batch_sizes=(16,),
                                    runtime_noise=0.1, runtime_seed=5)
    plain_grid = model_selection_instance(learning_rates=(1e-5,), batch_sizes=(16,))
    assert grid == with_runtime_noise(plain_grid, 0.1, 5)
    assert grid.params.restart_cost_s is None


def test_realized_instance_survives_a_file_round_trip(tmp_path: Any) -> None:
    """The truth is part of the instance: written to a file and read back, a checker run on
    the file's instance judges the realized schedule the same way."""
    from schedlab.instance import load_instance, write_json_atomic

    inst = slow_x()
    path = tmp_path / "slow-x.json"
    write_json_atomic(path, inst.to_dict())
    again = load_instance(path)
    assert again.jobs[0].runtime_factor == 2.0 and again.params.restart_cost_s == 10.0
    sol = introspective(interval_s=50.0).solve(again)
    assert sol.objective == pytest.approx(170.0) and check(again, sol) == []


# ---------------------------------------------------------------- checker: segments


def segmented(entries: list[ScheduleEntry], **metrics: Any) -> Solution:
    return Solution(instance=InstanceRef(name="slow-x", hash="-"), formulation="test",
                    status=Status.FEASIBLE, schedule=entries, metrics=metrics)


def good_segments() -> list[ScheduleEntry]:
    """X: [0, 100) single, then [100, 170) ddp = 10 s restore + 60 s; Y: [0, 100) single."""
    return [
        ScheduleEntry(job="X", start=0, end=100, node="n0", gpus=1, config="single", round=0),
        ScheduleEntry(job="X", start=100, end=170, node="n0", gpus=2, config="ddp", round=1),
        ScheduleEntry(job="Y", start=0, end=100, node="n0", gpus=1, config="single", round=0),
    ]


#: What a producer might claim in its metrics: the checker must not read it.
CLAIMED = {"true_runtime_s": {"X": {"single:1": 100.0, "ddp:2": 60.0},
                              "Y": {"single:1": 100.0}},
           "restart_cost_s": 0.0}


def test_checker_reads_the_truth_from_the_instance() -> None:
    """X really takes 2 x: 200 s on single, 120 s on ddp; restart cost 10 s.

    Good segments: X covers 100/200 + (70 - 10)/120 = 1/2 + 1/2 = 1, Y 100/100 = 1.
    At the estimates (the instance without its truth): X covers 100/100 + 70/60 > 2.
    With the factor but a free restart: X covers 1/2 + 70/120 = 13/12.
    Metrics claiming other runtimes change nothing."""
    assert check(slow_x(), segmented(good_segments())) == []
    assert check(slow_x(), segmented(good_segments(), **CLAIMED)) == []
    found = check(two_gpu_instance(), segmented(good_segments(), **CLAIMED))
    assert any("job X: segments cover 2.16666" in v for v in found), found
    found = check(slow_x(restart_cost_s=0.0), segmented(good_segments()))
    assert any("job X: segments cover 1.08333" in v for v in found), found


def test_checker_rejects_segments_that_assume_the_estimate() -> None:
    """A run that stops X after its estimated 100 s: X has done 100/200 = 1/2 of its work
    (f_X = 2 in the instance), whatever the metrics claim."""
    estimate_run = [
        ScheduleEntry(job="X", start=0, end=100, node="n0", gpus=1, config="single", round=0),
        ScheduleEntry(job="Y", start=0, end=100, node="n0", gpus=1, config="single", round=0),
    ]
    assert check(two_gpu_instance(), segmented(estimate_run)) == []
    found = check(slow_x(), segmented(estimate_run, **CLAIMED))
    assert found == ["job X: segments cover 0.5 of the job (must be 1: sum of (duration - "
                     "restart cost) / true runtime)"]


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
    found = check(slow_x(), segmented(entries))
    assert any(needle in v for v in found), found
