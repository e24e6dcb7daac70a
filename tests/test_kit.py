"""The conformance kit (schedlab.testing) over every registered formulation and policy, and
the kit's own teeth: stand-ins with one planted flaw each must fail the matching check."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import highspy
import pyomo.environ as pyo
import pytest

from schedlab import registry
from schedlab.formulations.base import Formulation
from schedlab.instance import Instance, instance_from_dict
from schedlab.policies.base import Policy
from schedlab.policies.registry import POLICIES, get_policy, policies, register_policy
from schedlab.policies.state import Assignment, ClusterState
from schedlab.simulator import simulate
from schedlab.solution import Solution, Status
from schedlab.solvers import SolveResult, SolverOptions, new_highs
from schedlab.testing import (
    KIT_CLUSTER,
    check_formulation,
    check_policy,
    decision_problems,
    policy_workload,
    random_cluster_state,
)

#: Registered names that fail a check today, with the finding (strict: a fix makes the test
#: fail until the name is taken off this list).
KNOWN_FORMULATION_FAILURES: dict[str, str] = {}
KNOWN_POLICY_FAILURES: dict[str, str] = {}


def _names(names: list[str], known: dict[str, str]) -> list[Any]:
    return [pytest.param(n, marks=pytest.mark.xfail(reason=known[n], strict=True,
                                                     raises=AssertionError))
            if n in known else n for n in names]


@pytest.mark.parametrize("name", _names(sorted(registry.formulations()),
                                        KNOWN_FORMULATION_FAILURES))
def test_every_formulation_conforms(name: str) -> None:
    report = check_formulation(name)
    assert {"solve", "checker", "status", "json", "bad_instance"} <= set(report.passed)


@pytest.mark.parametrize("name", _names(sorted(policies()), KNOWN_POLICY_FAILURES))
def test_every_policy_conforms(name: str) -> None:
    report = check_policy(name)
    assert {"valid", "no_mutation", "deterministic", "reset", "random_states"} <= set(
        report.passed)


def test_every_gavel_formulation_is_checked_as_a_policy() -> None:
    gavel = {n for n in registry.formulations() if n.startswith("gavel.")}
    assert gavel and gavel <= set(policies())


# ----------------------------------------------------------------------- the validity rule


def test_decision_problems_re_derives_the_simulators_rules() -> None:
    state = random_cluster_state(3)
    one = next(js for js in state.active if js.scale_factor == 1)
    fast = max(KIT_CLUSTER, key=lambda k: one.throughput.get(k, 0.0))
    assert decision_problems(state, [Assignment(one.id, fast)]) == []
    assert decision_problems(state, [Assignment(one.id, fast)] * 2) == [
        f"job {one.id!r} is assigned more than once"]
    assert decision_problems(state, [Assignment("nobody", fast)]) == ["job 'nobody' is not active"]
    gangs = [js for js in state.active if js.throughput.get(fast, 0.0) > 0]
    over = [Assignment(js.id, fast) for js in gangs]
    used = sum(js.scale_factor for js in gangs)
    if used > KIT_CLUSTER[fast]:
        assert f"{used} GPUs of {fast} in use but the cluster has {KIT_CLUSTER[fast]}" in \
            decision_problems(state, over)


def test_random_states_are_seeded_and_fit_the_cluster() -> None:
    a, b = random_cluster_state(5), random_cluster_state(5)
    assert a == b and a != random_cluster_state(6)
    ran = [js for js in a.active if js.last_round_run == a.round_index - 1]
    for k, n in KIT_CLUSTER.items():
        assert sum(js.scale_factor for js in ran if js.last_accelerator == k) <= n
    assert all(0 <= js.steps_done < js.total_steps for js in a.active)


def test_the_simulator_resets_a_policy_at_the_start_of_every_run() -> None:
    class Counting(Policy):
        resets = 0

        def reset(self) -> None:
            super().reset()
            self.resets += 1

        def decide(self, state: ClusterState) -> list[Assignment]:
            self.decisions += 1
            return []

    policy = Counting()
    simulate(policy_workload(), policy=policy, max_rounds=2)
    simulate(policy_workload(), policy=policy, max_rounds=3)
    assert policy.resets == 2 and policy.decisions == 3  # counters: the second run's own


# --------------------------------------------------------------- teeth: formulations


class ShareLp(Formulation):
    """Test stand-in: maximize sum_j T_j x_j  s.t.  sum_j s_j x_j <= n,  0 <= x_j <= 1, on the
    cluster's first type (x_j = share of time, T_j steps/s)."""

    description = "test stand-in: total throughput of time shares on one type"
    objective_sense = "maximize"

    def example_instance(self) -> Instance:
        # a: 3 steps/s, b: 2 steps/s, one GPU: x_a = 1, x_b = 0, objective 3 (by hand).
        return instance_from_dict({
            "name": "two-jobs", "cluster": {"accelerators": {"v100": {"count": 1}}},
            "jobs": [{"id": "a", "total_steps": 10, "throughput": {"v100": 3.0}},
                     {"id": "b", "total_steps": 10, "throughput": {"v100": 2.0}}]})

    def validate(self, instance: Instance) -> None:
        instance.require("throughput", formulation=self.name)

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        acc = instance.types[0]
        jobs = instance.jobs
        m = pyo.ConcreteModel()
        m.x = pyo.Var(range(len(jobs)), bounds=(0.0, 1.0))
        m.capacity = pyo.Constraint(expr=pyo.quicksum(
            job.scale_factor * m.x[i] for i, job in enumerate(jobs))
            <= instance.cluster.accelerators[acc].count)
        m.objective = pyo.Objective(expr=pyo.quicksum(
            job.throughput[acc] * m.x[i] for i, job in enumerate(jobs)), sense=pyo.maximize)
        return m

    def extract(self, model: pyo.ConcreteModel, instance: Instance,
                result: SolveResult) -> Solution:
        solution = self.empty_solution(instance, result)
        acc = instance.types[0]
        solution.allocation = {job.id: {acc: float(model.x[i].value)}
                               for i, job in enumerate(instance.jobs)
                               if (model.x[i].value or 0.0) > 1e-9}
        return solution

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        acc = instance.types[0]
        return sum(job.throughput[acc] * solution.allocation.get(job.id, {}).get(acc, 0.0)
                   for job in instance.jobs)


class NoBound(ShareLp):
    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        solution = super().solve(instance, options)
        solution.bound = solution.gap = None
        return solution


class WrongSideBound(ShareLp):
    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        solution = super().solve(instance, options)
        solution.status = Status.FEASIBLE
        solution.bound = 2.0  # below the objective 3 of a maximization
        solution.gap = 1 / 3
        return solution


class WrongGap(ShareLp):
    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        solution = super().solve(instance, options)
        solution.status, solution.bound, solution.gap = Status.FEASIBLE, 4.0, 0.5  # not 1/3
        return solution


class WrongObjective(ShareLp):
    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        solution = super().solve(instance, options)
        solution.objective = 2.5
        return solution


class NeedsNothing(ShareLp):
    def validate(self, instance: Instance) -> None:
        pass

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        return super().build(instance.model_copy(update={"jobs": [
            job.model_copy(update={"throughput": job.throughput or {"v100": 1.0}})
            for job in instance.jobs]}))


class SilentSense(ShareLp):
    objective_sense = None


class OptimalHeuristic(ShareLp):
    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        solution = super().solve(instance, options)
        solution.solver = "none"
        return solution


class NoExample(ShareLp):
    def example_instance(self) -> Instance:
        return Formulation.example_instance(self)


@pytest.fixture
def scoped_formulations() -> Iterator[None]:
    with registry.FORMULATIONS.scoped():
        yield


@pytest.mark.usefixtures("scoped_formulations")
def test_an_honest_stand_in_passes_every_check() -> None:
    registry.register("testing.share_lp", ShareLp)
    report = check_formulation("testing.share_lp")
    assert report.passed == ["solve", "checker", "objective", "status", "bound", "gap", "json",
                             "bad_instance"]


@pytest.mark.usefixtures("scoped_formulations")
@pytest.mark.parametrize(("cls", "message"), [
    (WrongSideBound, r"failed bound: for a maximization the bound must be >= the objective"),
    (WrongGap, r"failed gap: gap 0.5 but"),
    (WrongObjective, r"objective"),
    (NeedsNothing, r"failed bad_instance: removing any one of"),
    (SilentSense, r"failed bound: .*declares no objective_sense"),
    (OptimalHeuristic, r"failed status: a heuristic"),
    (NoExample, r"failed example: formulation testing.flawed declares no example instance"),
])
def test_a_planted_flaw_fails_its_check(cls: type[Formulation], message: str) -> None:
    registry.register("testing.flawed", cls)
    with pytest.raises(AssertionError, match=message):
        check_formulation("testing.flawed")


def test_optimal_without_a_bound_is_settled_to_feasible() -> None:
    """The status rule every solve ends with (schedlab.solution.settle_status) turns an
    optimal without a bound into feasible, so the kit's own check never sees that flaw."""
    form = NoBound()
    sol = form.solve(form.example_instance())
    assert sol.status == Status.FEASIBLE
    assert any("not within the optimality tolerance" in d for d in sol.diagnostics)


# -------------------------------------------------------------------- teeth: policies


class Greedy(Policy):
    """Test stand-in: jobs in arrival order, each on its first type with room."""

    def decide(self, state: ClusterState) -> list[Assignment]:
        self.decisions += 1
        free = dict(state.gpus)
        out = []
        for job in state.active:
            for k in sorted(job.throughput):
                if job.throughput[k] > 0 and free.get(k, 0) >= job.scale_factor:
                    free[k] -= job.scale_factor
                    out.append(Assignment(job.id, k))
                    break
        return out


class Mutating(Greedy):
    def decide(self, state: ClusterState) -> list[Assignment]:
        state.active[0].weight += 1.0
        return super().decide(state)


class OverCommitting(Greedy):
    def decide(self, state: ClusterState) -> list[Assignment]:
        return [Assignment(job.id, k) for job in state.active
                for k in sorted(job.throughput)[:1]]


class Unseeded(Greedy):
    def decide(self, state: ClusterState) -> list[Assignment]:
        plan = super().decide(state)
        random.Random(time.perf_counter_ns()).shuffle(plan)  # ignores the run's seed
        return plan


class Forgetful(Greedy):
    """Remembers the jobs it ever ran and puts them last, but never forgets (no reset)."""

    def __init__(self) -> None:
        super().__init__()
        self.ran: set[str] = set()

    def decide(self, state: ClusterState) -> list[Assignment]:
        ordered = sorted(state.active, key=lambda js: js.id in self.ran)
        plan = Greedy.decide(self, ClusterState(
            state.now, state.round_index, state.round_s, state.cluster, ordered,
            state.finished, state.job_set_version, state.seed))
        self.ran.update(a.job for a in plan)
        return plan


class Remembering(Forgetful):
    def reset(self) -> None:
        super().reset()
        self.ran = set()


class SolvingQuietly(Remembering):
    """Solves a tiny LP with HiGHS every round and ignores its status (never counts)."""

    count_failures = False

    def decide(self, state: ClusterState) -> list[Assignment]:
        h = new_highs()
        h.addVar(0.0, 1.0)
        h.changeColCost(0, 1.0)
        h.run()
        self.solves += 1
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal and self.count_failures:
            self.failed_solves += 1
        return super().decide(state)


class SolvingHonestly(SolvingQuietly):
    count_failures = True


@pytest.fixture
def scoped_policies() -> Iterator[None]:
    with POLICIES.scoped():
        yield


@pytest.mark.usefixtures("scoped_policies")
def test_honest_stand_ins_pass() -> None:
    register_policy("testing.greedy", Greedy)
    register_policy("testing.remembering", Remembering)
    register_policy("testing.solving", SolvingHonestly)
    assert "failed_solves" in check_policy("testing.greedy").skipped
    assert "reset" in check_policy("testing.remembering").passed
    assert "failed_solves" in check_policy("testing.solving").passed
    assert get_policy("testing.greedy").name == "testing.greedy"


@pytest.mark.usefixtures("scoped_policies")
@pytest.mark.parametrize(("cls", "message"), [
    (Mutating, r"failed no_mutation: decide\(\) changed the state"),
    (OverCommitting, r"failed valid: invalid decision .*GPUs of .* in use but the cluster has"),
    (Unseeded, r"failed deterministic"),
    (Forgetful, r"failed reset: the policy reused after another run decided differently"),
    (SolvingQuietly, r"failed failed_solves: every one of its \d+ HiGHS runs failed"),
])
def test_a_planted_policy_flaw_fails_its_check(cls: type[Policy], message: str) -> None:
    register_policy("testing.flawed", cls)
    with pytest.raises(AssertionError, match=message):
        check_policy("testing.flawed")
