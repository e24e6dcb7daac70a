"""A user's extra constraints (``Formulation.extend`` / ``schedlab.solve(extend=...)``) reach
every model a formulation solves, iterative ones included; heuristics and methods whose
sub-models differ refuse them with one clear error; heuristics are never ``optimal``."""

from __future__ import annotations

from pathlib import Path

import pyomo.environ as pyo
import pytest

import schedlab
from schedlab.errors import InputError
from schedlab.formulations.base import Heuristic
from schedlab.formulations.saturn.data import saturn_data
from schedlab.instance import Instance, load_instance
from schedlab.registry import get_formulation
from schedlab.solution import Status

ROOT = Path(__file__).resolve().parent.parent
GAVEL_SMALL = ROOT / "instances" / "gavel" / "small-6jobs.json"
THREE_JOBS = ROOT / "instances" / "saturn" / "three-jobs.json"


def _no_v100_for_first_job(calls: list[str]) -> object:
    """An extension forbidding job 0 the first accelerator type; records each model."""

    def extension(model: pyo.ConcreteModel, instance: Instance) -> None:
        calls.append(model.name)
        keys = [key for key in model.X if key == (0, 0)]
        model.user_no_first_type = pyo.Constraint(expr=sum(model.X[k] for k in keys) == 0)

    return extension


@pytest.mark.parametrize("name", ["gavel.max_min_fairness", "gavel.max_sum_throughput",
                                  "gavel.finish_time_fairness", "gavel.hierarchical",
                                  "gavel.min_makespan"])
def test_extra_constraint_holds_in_every_gavel_solution(name: str) -> None:
    instance = load_instance(GAVEL_SMALL)
    first_job, first_type = instance.jobs[0].id, instance.types[0]
    plain = schedlab.solve(instance, name)
    assert plain.allocation[first_job].get(first_type, 0.0) > 1e-6, \
        "the example must use the pair the extension forbids, or the test proves nothing"
    calls: list[str] = []
    solution = schedlab.solve(instance, name, extend=[_no_v100_for_first_job(calls)])
    assert solution.status.has_solution and not solution.violations
    assert solution.allocation[first_job].get(first_type, 0.0) <= 1e-9
    assert calls, "the extension was never applied"
    # an extra constraint can only make the optimum worse (or equal)
    if plain.status == Status.OPTIMAL and solution.status == Status.OPTIMAL:
        form = get_formulation(name)
        if form.objective_sense == "maximize":
            assert solution.objective <= plain.objective * (1 + 1e-7) + 1e-9
        else:
            assert solution.objective >= plain.objective * (1 - 1e-7) - 1e-9


def test_fast_path_refuses_and_auto_routes_to_the_reference_model() -> None:
    instance = load_instance(GAVEL_SMALL)
    fast = get_formulation("gavel.max_min_fairness", method="fast")
    fast.extend(_no_v100_for_first_job([]))
    with pytest.raises(InputError, match="does not take extra constraints"):
        fast.solve(instance)
    calls: list[str] = []
    auto = get_formulation("gavel.max_min_fairness", method="auto", fast_threshold=1)
    auto.extend(_no_v100_for_first_job(calls))
    solution = auto.solve(instance)
    assert calls and solution.allocation[instance.jobs[0].id].get(instance.types[0], 0.0) <= 1e-9


def test_saturn_extra_constraint_by_hand() -> None:
    """three-jobs: optimum 180 s with A on 2 GPUs (the instance's description derives it).
    Forcing A onto all 4 GPUs: A holds the node for 100 s and B, C then run side by side on
    2 GPUs each (ddp: 100 s and 80 s) -- 70 + 60 = 130 s one after the other on 4 GPUs, and
    any 1-GPU option is longer -- so the optimum is 100 + 100 = 200 s."""
    instance = load_instance(THREE_JOBS)
    data = saturn_data(instance)
    a = data.job_ids.index("A")

    def a_on_four_gpus(model: pyo.ConcreteModel, inst: Instance) -> None:
        small = [key for key in model.x if key[0] == a and data.options[a][key[1]].gpus < 4]
        model.user_a_on_four = pyo.Constraint(expr=sum(model.x[k] for k in small) == 0)

    plain = schedlab.solve(instance, "saturn.time_indexed")
    assert plain.objective == pytest.approx(180.0, rel=1e-9)
    solution = schedlab.solve(instance, "saturn.time_indexed", extend=[a_on_four_gpus])
    assert solution.status == Status.OPTIMAL and not solution.violations
    assert solution.objective == pytest.approx(200.0, rel=1e-9)
    assert {e.gpus for e in solution.schedule if e.job == "A"} == {4}


def test_heuristics_and_introspection_refuse_extensions() -> None:
    instance = load_instance(THREE_JOBS)
    with pytest.raises(InputError, match="heuristic"):
        schedlab.solve(instance, "saturn.greedy", extend=[lambda m, i: None])
    with pytest.raises(InputError, match="does not take extra constraints"):
        get_formulation("saturn.introspective").extend(lambda m, i: None)


@pytest.mark.parametrize("name", ["gavel.fifo", "saturn.greedy", "saturn.current_practice"])
def test_a_heuristic_is_never_optimal(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    form = get_formulation(name)
    assert isinstance(form, Heuristic)
    instance = load_instance(GAVEL_SMALL if name.startswith("gavel") else THREE_JOBS)
    original = type(form).run

    def claims_optimal(self: Heuristic, inst: Instance) -> schedlab.Solution:
        solution = original(self, inst)
        solution.status = Status.OPTIMAL  # a heuristic that overclaims
        return solution

    monkeypatch.setattr(type(form), "run", claims_optimal)
    solution = form.solve(instance)
    assert solution.status == Status.FEASIBLE and solution.solver == "none"
