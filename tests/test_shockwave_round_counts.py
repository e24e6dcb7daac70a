"""The integral mode's round-count relaxation returns an optimum of Shockwave's full MILP.

The argument (docs/formulations/shockwave.md, "Round counts first"): the MILP's objective
reads x only through n_j = sum_t x[j,t]; every plan's counts meet the one summed capacity row,
so the problem over integer counts is a relaxation (its optimum bounds the MILP's); when its
counts pack into rounds the packed plan is a plan of the MILP with the relaxation's objective,
hence optimal for the MILP.  These tests check the conclusion on many windows, each solved
twice: ``integral_method="round_counts"`` (the default) and ``"full"`` (the MILP over
x[j,t] in {0, 1}, as Shockwave's code writes it), both to a MIP gap of 1e-9 -- random
windows of 2-6 jobs with gangs of 1-4 GPUs, with and without finish-time rows and with the
relaxed re-solve's priorities, and the windows a Shockwave simulation actually solved.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from schedlab.check import check
from schedlab.formulations.shockwave.nash import NashWelfare
from schedlab.instance import Instance, instance_from_dict
from schedlab.policies.shockwave import Shockwave
from schedlab.simulator.engine import simulate
from schedlab.solution import Solution, Status
from schedlab.solvers import SolverOptions
from schedlab.workloads.shockwave import generate_shockwave_instance

TIGHT = SolverOptions(mip_gap=1e-9, time_limit_s=120.0)


def random_window(rng: np.random.Generator) -> Instance:
    """2-6 static jobs (s GPUs, E epochs, e done, t s per epoch) on 2-6 GPUs, 2-5 rounds."""
    gpus = int(rng.integers(2, 7))
    rounds = int(rng.integers(2, 6))
    docs: list[dict[str, Any]] = []
    for i in range(int(rng.integers(2, 7))):
        epochs = int(rng.integers(1, 15))
        docs.append({
            "id": f"j{i}", "scale_factor": int(rng.choice([1, 1, 2, 4][: 2 + (gpus >= 4)])),
            "epochs": epochs, "epochs_done": int(rng.integers(0, epochs)),
            "batch_schedule": [32] * epochs,
            "regimes": {"32": float(rng.choice([20.0, 45.0, 60.0, 150.0, 300.0]))},
            "throughput": {"v100": 1.0}})
    return instance_from_dict({
        "name": "random-window", "cluster": {"accelerators": {"v100": {"count": gpus}}},
        "params": {"round_s": 120.0, "window_rounds": rounds}, "jobs": docs})


def both(instance: Instance, **kwargs: Any) -> tuple[Solution, Solution]:
    """The window solved by round counts (default) and by the full MILP."""
    counts = NashWelfare("integral", **kwargs).solve(instance, TIGHT)
    full = NashWelfare("integral", integral_method="full", **kwargs).solve(instance, TIGHT)
    return counts, full


def assert_same_optimum(counts: Solution, full: Solution, instance: Instance,
                        plain: bool = True) -> None:
    assert full.status in (Status.OPTIMAL, Status.INFEASIBLE), full.diagnostics
    assert counts.status == full.status, (counts.diagnostics, full.diagnostics)
    if full.status is Status.INFEASIBLE:
        return
    assert counts.objective is not None and full.objective is not None
    assert counts.objective == pytest.approx(full.objective, rel=1e-6, abs=1e-9)
    # the packed plan is a plan of the MILP: every round within capacity, each job in
    # exactly as many rounds as its share says
    gpus = instance.cluster.total_gpus
    rounds = instance.params.window_rounds
    assert counts.rounds is not None and len(counts.rounds) == rounds
    for placements in counts.rounds:
        assert sum(p.gpus for p in placements) <= gpus
    for job in instance.jobs:
        ran = sum(any(p.job == job.id for p in placements) for placements in counts.rounds)
        assert ran == round(counts.allocation[job.id]["v100"] * rounds)
    if plain:  # the checker re-derives the plain window objective (no rows, no priorities)
        assert not check(instance, counts)


@pytest.mark.parametrize("seed", range(4))
def test_round_counts_equal_the_full_milp_on_random_windows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    settled = 0
    for _ in range(12):
        instance = random_window(rng)
        counts, full = both(instance)
        assert_same_optimum(counts, full, instance)
        settled += bool(counts.metrics.get("round_count_relaxation"))
    assert settled >= 6  # the relaxation itself answered most windows (not only fallbacks)


@pytest.mark.parametrize("seed", range(2))
def test_round_counts_equal_the_full_milp_under_rows_and_priorities(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    for _ in range(8):
        instance = random_window(rng)
        ids = [j.id for j in instance.jobs]
        # finish-time targets a little beyond the window's end: some rows bind, some not
        horizon = instance.params.round_s * (instance.params.window_rounds or 1)
        targets = {j: float(horizon * rng.uniform(1.0, 6.0)) for j in ids}
        assert_same_optimum(*both(instance, finish_time_targets=targets), instance, False)
        # the relaxed re-solve: rho^lambda priorities spanning many orders of magnitude
        priorities = {j: float(10.0 ** rng.uniform(0, 6)) for j in ids}
        assert_same_optimum(*both(instance, priorities=priorities), instance, False)


class _Capture(Shockwave):
    """Shockwave that keeps every window it solves (with its formulation's settings)."""

    def __init__(self) -> None:
        super().__init__("integral")
        self.windows: list[tuple[Instance, NashWelfare]] = []

    def _solve(self, formulation: NashWelfare, window: Instance) -> Solution:
        self.windows.append((window, formulation))
        return super()._solve(formulation, window)


def test_round_counts_equal_the_full_milp_on_a_simulations_windows() -> None:
    instance = generate_shockwave_instance(10, {"v100": 4}, seed=25, window_rounds=4)
    policy = _Capture()
    assert simulate(instance, policy=policy, max_rounds=30).jobs
    assert len(policy.windows) >= 5
    for window, formulation in policy.windows[:12]:
        kwargs = {"k": formulation.k, "predictor": formulation.predictor,
                  "finish_time_targets": formulation.finish_time_targets or None,
                  "rho_max": formulation.rho_max, "priorities": formulation.priorities or None}
        assert_same_optimum(*both(window, **kwargs), window, False)
