"""The persistent fast paths of the Gavel adapter against the reference models.

Max-sum-throughput (and its cost / best-type variants) runs on a class LP, min makespan and
finish-time fairness on per-job LPs changed in place (``schedlab.policies.gavel_class_lp``,
``schedlab.policies.gavel_job_lp``).  Checked here: optima worked out by hand (with their unique
allocations), and along simulated random workloads every decision's objective against the
reference model solved from scratch on the same state (``method="generic"``'s formulation), with
the fast allocation's own objective recomputed by the reference's ``objective_value``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from schedlab.formulations.gavel.data import GavelData, allocation_arrays, gavel_data
from schedlab.formulations.gavel.hierarchical import Hierarchical
from schedlab.formulations.gavel.models import GavelMethod
from schedlab.instance import Instance, instance_from_dict
from schedlab.policies import gavel_job_lp, gavel_water_filling
from schedlab.policies.gavel import GavelPolicy
from schedlab.policies.state import ClusterState
from schedlab.registry import formulations
from schedlab.simulator import jobs_from_instance, simulate
from schedlab.workloads.gavel import generate_gavel_instance

FAST = ("gavel.max_sum_throughput", "gavel.max_sum_throughput_agnostic",
        "gavel.max_sum_throughput_normalized", "gavel.min_cost", "gavel.min_cost_normalized",
        "gavel.min_makespan", "gavel.min_makespan_agnostic", "gavel.finish_time_fairness",
        "gavel.finish_time_fairness_agnostic", "gavel.hierarchical",
        "gavel.hierarchical_agnostic")

#: relative agreement of two objectives: the LPs' optima (1e-6), finish-time fairness's two
#: searches each within its relative tolerance 1e-6 of the optimum (so 2e-6 apart at most)
TOLERANCE = {"gavel.finish_time_fairness": 3e-6, "gavel.finish_time_fairness_agnostic": 3e-6,
             "gavel.hierarchical": 2e-5, "gavel.hierarchical_agnostic": 2e-5}


def snapshot(instance: Instance, now: float = 0.0) -> ClusterState:
    return ClusterState(now=now, round_index=0, round_s=instance.params.round_s,
                        cluster=instance.cluster, active=jobs_from_instance(instance),
                        finished=[], job_set_version=1)


def two_jobs(cluster: dict[str, int], jobs: list[tuple[str, float, dict[str, float]]]
             ) -> Instance:
    return instance_from_dict({
        "cluster": {"accelerators": {k: {"count": n, "cost_per_hour": 1.0}
                                     for k, n in cluster.items()}},
        "jobs": [{"id": i, "total_steps": steps, "scale_factor": 1, "throughput": thr}
                 for i, steps, thr in jobs],
        "params": {"num_rounds": 0}})


# ------------------------------------------------------------------- optima by hand


def test_sum_throughput_unique_optimum_by_hand() -> None:
    """1 V100 + 1 K80; A runs 4 / 1 steps/s, B 2 / 1.5: A on the V100 and B on the K80 give
    4 + 1.5 = 5.5, the swap 1 + 2 = 3 and any mix lies between (the LP's only optimum)."""
    instance = two_jobs({"v100": 1, "k80": 1}, [("A", 100.0, {"v100": 4.0, "k80": 1.0}),
                                                 ("B", 100.0, {"v100": 2.0, "k80": 1.5})])
    policy = GavelPolicy("gavel.max_sum_throughput")
    policy.decide(snapshot(instance))
    assert policy.path == "array" and policy.fast_path == "sum_throughput"
    assert policy.last_objective == pytest.approx(5.5, rel=1e-9)
    assert policy.allocation() == {"A": pytest.approx({"v100": 1.0}),
                                   "B": pytest.approx({"k80": 1.0})}


def test_makespan_unique_optimum_by_hand() -> None:
    """One GPU, A has 100 steps left and B 300, both at 1 step/s: X_A >= 100 y, X_B >= 300 y,
    X_A + X_B <= 1 give y = 1/400 (makespan 400 s) with X_A = 1/4, X_B = 3/4."""
    instance = two_jobs({"v100": 1}, [("A", 100.0, {"v100": 1.0}),
                                      ("B", 300.0, {"v100": 1.0})])
    policy = GavelPolicy("gavel.min_makespan")
    policy.decide(snapshot(instance))
    assert policy.fast_path == "makespan"
    assert policy.last_objective == pytest.approx(400.0, rel=1e-9)
    assert policy.allocation() == {"A": pytest.approx({"v100": 0.25}),
                                   "B": pytest.approx({"v100": 0.75})}


def test_finish_time_fairness_against_a_one_dimensional_search() -> None:
    """One GPU and two 1-GPU jobs, A already 2000 s in the system (50 steps left at 0.1
    step/s; isolated time 0: the policy has not seen it before), B new (200 steps at 1
    step/s): the optimum uses the whole GPU,
    X_B = 1 - X_A, so min max rho is a one-dimensional problem, solved here by a fine grid and
    golden-section refinement on the rho of schedlab.fairness (an independent method)."""
    instance = two_jobs({"v100": 1}, [("A", 50.0, {"v100": 0.1}),
                                      ("B", 200.0, {"v100": 1.0})])
    state = snapshot(instance, now=2000.0)
    state.active[0].arrival = 0.0
    state.active[1].arrival = 2000.0
    policy = GavelPolicy("gavel.finish_time_fairness")
    policy.decide(state)
    assert policy.fast_path == "finish_time"
    t = np.array([2000.0, 0.0])
    r = np.array([50.0, 200.0])
    thr = np.array([0.1, 1.0])
    iso = thr * 0.5  # 1/m of the one GPU, m = 2
    denom = r / iso

    def worst(xa: float) -> float:
        x = np.array([xa, 1.0 - xa])
        return float(((t + r / (thr * x)) / denom).max())

    grid = np.linspace(1e-4, 1 - 1e-4, 20001)
    best = grid[int(np.argmin([worst(v) for v in grid]))]
    lo, hi = best - 1e-4, best + 1e-4
    golden = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
        lo, hi = (lo, b) if worst(a) < worst(b) else (a, hi)
    optimum = worst(0.5 * (lo + hi))
    assert policy.last_objective == pytest.approx(optimum, rel=2e-6)
    x = policy.allocation()
    assert worst(x["A"]["v100"]) == pytest.approx(optimum, rel=2e-6)
    assert x["A"]["v100"] == pytest.approx(0.5 * (lo + hi), rel=1e-4)


# ------------------------------------------------------- simulated: every decision


def makespan_by_scipy(data: GavelData, aware: bool) -> float:
    """min makespan by scipy's linprog, written here from the LP's definition, with the
    variable v = y max_j R_j so that it is well scaled (module ``gavel_job_lp``: the
    reference's unscaled y can stop short of the optimum).  Agnostic: one share x_j per job
    spread over the allowed types in proportion to n_k."""
    num_jobs, num_types = data.throughput.shape
    scale = float(data.remaining_steps.max())
    if aware:
        thr_cols = [(j, data.throughput[j, k], np.eye(num_types)[k])
                    for j in range(num_jobs) for k in range(num_types) if data.allowed[j, k]]
    else:
        thr_cols = []
        for j in range(num_jobs):
            spread = np.where(data.allowed[j], data.gpus, 0.0)
            spread = spread / spread.sum()
            thr_cols.append((j, float((data.throughput[j] * spread).sum()), spread))
    width = len(thr_cols) + 1
    a_ub, b_ub = [], []
    for j in range(num_jobs):
        share = np.zeros(width)
        lead = np.zeros(width)
        for i, (owner, thr, direction) in enumerate(thr_cols):
            if owner == j:
                share[i] = direction.sum()
                lead[i] = -thr
        lead[-1] = data.remaining_steps[j] / scale
        a_ub += [share, lead]
        b_ub += [1.0, 0.0]
    for k in range(num_types):
        row = np.zeros(width)
        for i, (owner, _, direction) in enumerate(thr_cols):
            row[i] = data.scale_factor[owner] * direction[k]
        a_ub.append(row)
        b_ub.append(data.gpus[k])
    cost = np.zeros(width)
    cost[-1] = -1.0
    result = linprog(cost, A_ub=np.array(a_ub), b_ub=b_ub,
                     bounds=[(0.0, 1.0)] * (width - 1) + [(0.0, None)], method="highs")
    assert result.status == 0
    return scale / -result.fun


class ReferenceCheck(GavelPolicy):
    """The fast path, with every solve also solved by the reference model on the same state
    (the formulation's own ``solve`` on :meth:`instance_from_state`); the two objectives, the
    fast allocation's objective recomputed by the reference's ``objective_value`` and, for
    min makespan, the optimum of :func:`makespan_by_scipy` are recorded for the test."""

    def __init__(self, formulation: str) -> None:
        super().__init__(formulation)
        self.pairs: list[tuple[float, float, float, float]] = []
        self.values: list[tuple[np.ndarray, np.ndarray]] = []

    def _solve(self, state: ClusterState) -> None:
        super()._solve(state)
        instance = self.instance_from_state(state)
        form = formulations()[self.formulation].make()
        assert isinstance(form, GavelMethod)
        form.num_rounds = 0
        reference = form.solve(instance)
        assert reference.objective is not None and self.last_objective is not None
        data, _ = form.policy_data(instance)
        x, y = allocation_arrays(gavel_data(instance), self.allocation())
        independent = (makespan_by_scipy(data, form.heterogeneity_aware)
                       if self.fast_path == "makespan" else reference.objective)
        self.pairs.append((self.last_objective, reference.objective,
                           form.objective_value(data, x, y), independent))
        # the water-filling levels are unique (FIFO inside shared entities: both reference)
        if self.fast_path == "water_filling" and not (self._within_fifo
                                                      and self._shared_entity(state)):
            x_ref, _ = allocation_arrays(data, reference.allocation)
            self.values.append((Hierarchical._values(data, x, y),
                                Hierarchical._values(data, x_ref, y)))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FAST), st.integers(0, 10_000), st.integers(4, 9))
def test_every_decision_reaches_the_reference_objective(name: str, seed: int, jobs: int
                                                         ) -> None:
    instance = generate_gavel_instance(jobs, {"v100": 2, "p100": 2, "k80": 2}, seed=seed,
                                       jobs_per_hour=8)
    cluster = instance.cluster.model_copy(update={"accelerators": {
        k: p.model_copy(update={"cost_per_hour": c})
        for (k, p), c in zip(instance.cluster.accelerators.items(), (2.48, 1.46, 0.45),
                             strict=True)}})
    instance = instance.model_copy(update={"cluster": cluster})
    policy = ReferenceCheck(name)
    result = simulate(instance, policy=policy, round_s=360.0)
    assert result.complete and policy.pairs and result.failed_solves == 0
    rel = TOLERANCE.get(name, 1e-6)
    for fast, reference, recomputed, independent in policy.pairs:
        assert fast == pytest.approx(independent, rel=rel, abs=1e-9)
        assert recomputed == pytest.approx(fast, rel=rel, abs=1e-9)
        if policy.fast_path == "makespan":  # the reference never beats the optimum
            assert reference >= independent * (1 - 1e-7)
        else:
            assert fast == pytest.approx(reference, rel=rel, abs=1e-9)
    for fast_values, reference_values in policy.values:  # v_j of every job: the same levels
        assert fast_values == pytest.approx(reference_values, rel=1e-5, abs=1e-7)


def test_class_split_equals_the_per_job_optimum_for_identical_jobs() -> None:
    """Four identical 1-GPU jobs on 2 V100 + 2 K80 (T = 3 / 1 steps/s): the sum is at most
    2 x 3 + 2 x 1 = 8 (every GPU busy on its own type); the class LP splits it evenly,
    X = 1/2 V100 + 1/2 K80 per job, which reaches 8."""
    instance = two_jobs({"v100": 2, "k80": 2},
                        [(f"j{i}", 100.0, {"v100": 3.0, "k80": 1.0}) for i in range(4)])
    policy = GavelPolicy("gavel.max_sum_throughput")
    policy.decide(snapshot(instance))
    assert policy.last_objective == pytest.approx(8.0, rel=1e-9)
    for shares in policy.allocation().values():
        assert shares == pytest.approx({"v100": 0.5, "k80": 0.5})


def test_per_job_model_retires_and_rebuilds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long stream through the per-job model (jobs come and go, slots are retired and, with
    no spare slots allowed, the model is rebuilt often) keeps every decision at the reference
    optimum."""
    monkeypatch.setattr(gavel_job_lp, "_SPARE_SLOTS", 0)
    instance = generate_gavel_instance(40, {"v100": 2, "k80": 2}, seed=11, jobs_per_hour=30)
    policy = ReferenceCheck("gavel.min_makespan")
    result = simulate(instance, policy=policy, round_s=360.0)
    assert result.complete and len(policy.pairs) > 20
    for fast, reference, recomputed, independent in policy.pairs:
        assert fast == pytest.approx(independent, rel=1e-6)
        assert recomputed == pytest.approx(fast, rel=1e-6)
        assert reference >= independent * (1 - 1e-7)


@pytest.mark.parametrize("name", ["gavel.hierarchical", "gavel.hierarchical_agnostic",
                                  "gavel.hierarchical_fifo"])
@pytest.mark.parametrize(("seed", "entities"), [(1, None), (2, 2), (3, 3), (4, None)])
def test_water_filling_levels_equal_the_reference(name: str, seed: int,
                                                  entities: int | None) -> None:
    """Every decision of a simulated run (jobs of two or three entities, or each its own;
    FIFO inside entities: the decisions without shared entities): the value
    v_j = s_j thr_j / T_eq[j] of every job equals the reference water-filling's (the max-min
    fair levels are unique), and so does the first level."""
    instance = generate_gavel_instance(10, {"v100": 2, "p100": 2, "k80": 2}, seed=seed,
                                       jobs_per_hour=10, entities=entities)
    policy = ReferenceCheck(name)
    result = simulate(instance, policy=policy, round_s=360.0)
    # FIFO inside shared entities: those decisions are the reference's own (no values kept)
    assert result.complete and len(policy.pairs) > 5 and policy.values
    for fast, reference, recomputed, _ in policy.pairs:
        assert fast == pytest.approx(reference, rel=2e-5, abs=1e-7)
        assert recomputed == pytest.approx(fast, rel=2e-5, abs=1e-7)
    for fast_values, reference_values in policy.values:
        assert fast_values == pytest.approx(reference_values, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("name", ["gavel.finish_time_fairness", "gavel.min_makespan",
                                  "gavel.max_sum_throughput", "gavel.hierarchical"])
def test_a_failed_array_solve_is_counted(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An array-path solve that raises SolverError falls back to priority order and is
    counted in ``failed_solves``, as a failed reference solve is."""
    from schedlab.errors import SolverError
    from schedlab.policies import gavel_class_lp, gavel_water_filling

    def broken(*args: object, **kwargs: object) -> None:
        raise SolverError("sabotaged")

    for cls in (gavel_job_lp.FinishTimeSearch, gavel_job_lp.MakespanLP,
                gavel_class_lp.SumThroughputClassLP, gavel_water_filling.WaterFilling):
        monkeypatch.setattr(cls, "solve", broken)
    instance = generate_gavel_instance(4, {"v100": 1, "k80": 1}, seed=2, jobs_per_hour=20)
    result = simulate(instance, policy=GavelPolicy(name), round_s=360.0)
    assert result.complete
    assert result.failed_solves == result.solves > 0


# ------------------------------------------------------------------- gavel.fifo


class FifoReferenceCheck(GavelPolicy):
    """``gavel.fifo``'s array walk, with every decision also solved by the reference
    formulation on :meth:`instance_from_state`; both allocations are recorded."""

    def __init__(self, formulation: str) -> None:
        super().__init__(formulation)
        self.allocations: list[tuple[dict[str, dict[str, float]],
                                     dict[str, dict[str, float]]]] = []
        self.waiting: list[int] = []  # active jobs without a gang, per decision

    def _solve(self, state: ClusterState) -> None:
        super()._solve(state)
        form = formulations()[self.formulation].make()
        assert isinstance(form, GavelMethod)
        form.num_rounds = 0
        reference = form.solve(self.instance_from_state(state))
        self.allocations.append((
            {job: shares for job, shares in self.allocation().items() if shares},
            {job: shares for job, shares in reference.allocation.items() if shares}))
        self.waiting.append(len(state.active) - len(self.allocations[-1][0]))


def test_fifo_walk_by_hand() -> None:
    """2 V100 + 1 K80, jobs in arrival order a (2 GPUs, faster on V100), b (1 GPU, faster
    on V100), c (1 GPU, only K80), d (1 GPU): a takes both V100s, b finds no V100 left and
    takes the K80, c (K80 only) and d find nothing."""
    instance = instance_from_dict({
        "cluster": {"accelerators": {"v100": {"count": 2}, "k80": {"count": 1}}},
        "jobs": [
            {"id": "a", "arrival": 0.0, "total_steps": 100, "scale_factor": 2,
             "throughput": {"v100": 4.0, "k80": 1.0}},
            {"id": "b", "arrival": 1.0, "total_steps": 100, "scale_factor": 1,
             "throughput": {"v100": 3.0, "k80": 1.0}},
            {"id": "c", "arrival": 2.0, "total_steps": 100, "scale_factor": 1,
             "throughput": {"k80": 1.0}},
            {"id": "d", "arrival": 3.0, "total_steps": 100, "scale_factor": 1,
             "throughput": {"v100": 1.0, "k80": 2.0}}],
        "params": {"num_rounds": 0}})
    policy = GavelPolicy("gavel.fifo")
    assert policy.fast_path == "fifo"
    policy.decide(snapshot(instance))
    assert policy.allocation() == {"a": {"v100": 1.0}, "b": {"k80": 1.0}, "c": {}, "d": {}}
    assert policy.last_objective == 2.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fifo_every_decision_equals_the_reference(seed: int) -> None:
    """Along a simulated stream with contention (40 jobs, 2 + 2 + 2 GPUs), every decision's
    allocation is the reference formulation's (FIFO's allocation is unique)."""
    instance = generate_gavel_instance(40, {"v100": 2, "p100": 2, "k80": 2}, seed=seed,
                                       jobs_per_hour=20)
    policy = FifoReferenceCheck("gavel.fifo")
    result = simulate(instance, policy=policy, round_s=360.0)
    assert result.complete and len(policy.allocations) > 20
    assert max(policy.waiting) > 0  # decisions where some active job got no GPU
    for fast, reference in policy.allocations:
        assert fast == reference


def test_water_filling_classes_by_hand() -> None:
    """2 V100 + 2 K80; three identical 1-GPU jobs a (T = 2 / 1 steps/s, T_eq = 1.5) and b
    (K80 only, T = 1, T_eq = 0.5), each its own entity (omega = 1), v_j = thr_j / T_eq[j].
    The a's fill the V100s (2/3 each) and their remaining share goes to K80 (1/3 each):
    v_a = (2 x 2/3 + 1/3) / 1.5 = 10/9, their most (share and V100s full); b takes the last
    K80: v_b = 1 / 0.5 = 2, its cap.  Leximin: every a at 10/9, b at 2, the allocation
    unique (sum_a (2 x_v + x_k) = 5 = sum x_v + sum (x_v + x_k) <= 2 + 3 forces it)."""
    instance = two_jobs({"v100": 2, "k80": 2},
                        [*((f"a{i}", 100.0, {"v100": 2.0, "k80": 1.0}) for i in range(3)),
                         ("b", 100.0, {"k80": 1.0})])
    policy = GavelPolicy("gavel.hierarchical")
    policy.decide(snapshot(instance))
    assert policy.last_objective == pytest.approx(10 / 9, rel=1e-6)
    allocation = policy.allocation()
    for i in range(3):
        assert allocation[f"a{i}"] == pytest.approx({"v100": 2 / 3, "k80": 1 / 3}, rel=1e-6)
    assert allocation["b"] == pytest.approx({"k80": 1.0}, rel=1e-6)
    water = policy._job_lp
    assert isinstance(water, gavel_water_filling.WaterFilling) and water.classes == 2


def test_hierarchical_fifo_takes_the_reference_when_entities_are_shared(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """FIFO inside entities runs the array path only while no two active jobs share an
    entity; other decisions are solved by the reference model (and agree with it)."""
    shared: list[bool] = []
    original = GavelPolicy._solve_per_job

    def spy(self: GavelPolicy, state: ClusterState) -> None:
        shared.append(GavelPolicy._shared_entity(state))
        original(self, state)

    monkeypatch.setattr(GavelPolicy, "_solve_per_job", spy)
    instance = generate_gavel_instance(10, {"v100": 2, "p100": 2, "k80": 2}, seed=2,
                                       jobs_per_hour=10, entities=2)
    policy = ReferenceCheck("gavel.hierarchical_fifo")
    result = simulate(instance, policy=policy, round_s=360.0)
    assert result.complete and result.failed_solves == 0
    assert not any(shared) and result.solves > len(shared)
    for fast_values, reference_values in policy.values:
        assert fast_values == pytest.approx(reference_values, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("name", ["gavel.hierarchical", "gavel.hierarchical_agnostic"])
def test_water_filling_without_duals_uses_the_reference_test(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the duals ignored (no dual exceeds an infinite threshold), every level's
    bottlenecks come from the reference's sum-of-values test; the values are still the
    reference's at every decision."""
    monkeypatch.setattr(gavel_water_filling, "_DUAL_TOL", math.inf)
    calls: list[int] = []
    original = gavel_water_filling.WaterFilling._by_sum_test

    def counted(self: gavel_water_filling.WaterFilling, *args: object) -> object:
        calls.append(1)
        return original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(gavel_water_filling.WaterFilling, "_by_sum_test", counted)
    instance = generate_gavel_instance(10, {"v100": 2, "p100": 2, "k80": 2}, seed=5,
                                       jobs_per_hour=10)
    policy = ReferenceCheck(name)
    result = simulate(instance, policy=policy, round_s=360.0)
    assert result.complete and result.failed_solves == 0 and len(policy.values) > 5
    assert calls  # the levels not settled by caps went through the reference's test
    for fast_values, reference_values in policy.values:
        assert fast_values == pytest.approx(reference_values, rel=1e-5, abs=1e-7)
