"""Properties of Shockwave's window problem on small random windows (hypothesis).

Windows of 2-5 static jobs (one batch size, t whole seconds per epoch) on 1-4 V100s over 2-4
rounds of L = 120 s.  For such a job every input of the window is known by hand: the profile
is read in whole seconds, so d_j = t; the oracle predictor gives Rem_j = (E_j - e_j) t and
Shockwave's gives (E_j - e_j - 1) t (one regime: the posterior rebased to E_j, less the
e_j + 1 epochs it counts, is E_j - e_j - 1 epochs of t seconds; its inflation factor
(E - e) / max(int(E - e - 1 + 1), E - e) is 1).

**How close p must be.**  The convex mode returns a plan whose exact objective f is
within bound - objective (its certificate) of the optimum f*.  The objective is concave in p and
job j's term w_j log((e_j + p_j)/E_j) has curvature at least w_j / E_j^2 on [0, E_j - e_j]
(w_j = B_j / (W sum B)), so a plan within gap of f* has |p_j - p*_j| <= E_j sqrt(2 gap / w_j)
(concavity at the optimum: f(p) <= f* - (w_j / E_j^2) (p_j - p*_j)^2 / 2).  At the default
``oa_tolerance`` (1e-7) this allows up to about 0.1 epoch here (E <= 12, w_j >= 1/70 for the
jobs compared, |LB| up to ~7): the optimum is flat.  The tests solve with
``oa_tolerance=1e-10`` (about the smallest the LP's 1e-10 feasibility tolerances let the
loop close), compare p within the bound of their own solves (plus 1e-7 for those LP
tolerances), and check that this bound is below 5e-3 epochs for the jobs compared, so the
comparison is never vacuous (the loop closes at gap <= 1e-10 max(1, |LB|), up to ~7e-10 here:
E sqrt(2 gap / w) reaches ~2.5e-3 epochs; hypothesis found 1.0e-3 at a gap of 1.3e-10).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.formulations.shockwave.nash import NashWelfare
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Solution, Status
from schedlab.solvers import SolverOptions

ROUND_S = 120.0
K = 1e-3
#: Shockwave's piecewise-linear log: breakpoints and values (log 0 read as log 1e-6).
BREAKS = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
LOG_BREAKS = [math.log(1e-6), math.log(0.2), math.log(0.4), math.log(0.6), math.log(0.8), 0.0]
#: The largest p difference the tests accept as "equal" (module docstring).
P_TOLERANCE = 5e-3
#: Slack for the LP's own tolerances (HiGHS primal/dual feasibility 1e-10 in convex mode).
LP_SLACK = 1e-7
OA_TOLERANCE = 1e-10

Job = tuple[int, int, int, int]  # (scale factor s, epochs E, epochs done e, seconds t)

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def windows(draw: st.DrawFn, min_jobs: int = 2,
            max_jobs: int = 5) -> tuple[list[Job], int, int]:
    """(jobs, GPUs, rounds): 2-5 static jobs, 1-4 GPUs, 2-4 rounds, gangs that fit."""
    gpus = draw(st.integers(1, 4))
    rounds = draw(st.integers(2, 4))
    jobs: list[Job] = []
    for _ in range(draw(st.integers(min_jobs, max_jobs))):
        epochs = draw(st.integers(1, 12))
        jobs.append((draw(st.integers(1, min(2, gpus))), epochs,
                     draw(st.integers(0, epochs - 1)), draw(st.sampled_from([20, 60, 150]))))
    return jobs, gpus, rounds


def window(jobs: list[Job], gpus: int, rounds: int,
           budgets: list[float] | None = None) -> Instance:
    """The instance of static jobs (s, E, e, t) with budgets (``weight``; default 1)."""
    docs: list[dict[str, Any]] = []
    for i, (s, epochs, done, t) in enumerate(jobs):
        docs.append({"id": f"j{i}", "scale_factor": s, "epochs": epochs, "epochs_done": done,
                     "batch_schedule": [64] * epochs, "regimes": {"64": float(t)},
                     "throughput": {"v100": 1.0},
                     "weight": 1.0 if budgets is None else budgets[i]})
    return instance_from_dict({
        "name": "property-window",
        "cluster": {"accelerators": {"v100": {"count": gpus}}},
        "params": {"round_s": ROUND_S, "window_rounds": rounds},
        "jobs": docs})


def solve(instance: Instance, mode: str, predictor: str = "shockwave") -> Solution:
    form = NashWelfare(mode, predictor=predictor,  # type: ignore[arg-type]
                       oa_tolerance=OA_TOLERANCE)
    form.name = "shockwave.nash_welfare" + ("_convex" if mode == "convex" else "")
    # a MIP gap within the optimality tolerance (1e-4): Shockwave's 1e-3 proves only feasible
    solution = form.solve(instance, SolverOptions(mip_gap=1e-6))
    assert solution.status == Status.OPTIMAL, solution.diagnostics
    return solution


def planned(solution: Solution, count: int) -> np.ndarray:
    """p_j of the plan, before rounding."""
    return np.array([solution.metrics["planned_epochs"][f"j{i}"] for i in range(count)])


def p_bound(solution: Solution, jobs: list[Job], budgets: list[float], rounds: int,
            which: list[int]) -> np.ndarray:
    """E_j sqrt(2 gap / w_j) for the jobs ``which``: how far the plan's p_j can be from the
    optimum's (module docstring); checked to be below :data:`P_TOLERANCE`."""
    epochs = np.array([jobs[j][1] for j in which], dtype=float)
    b = np.array(budgets, dtype=float)
    w = b[which] / (rounds * b.sum())
    assert solution.bound is not None and solution.objective is not None
    gap = max(float(solution.bound - solution.objective), 0.0)
    bound = epochs * np.sqrt(2.0 * gap / w)
    assert bound.max() < P_TOLERANCE, f"the OA certificate allows {bound.max():.2g} epochs"
    return bound + LP_SLACK


# --------------------------------------------------------------------- (a) budgets


@SETTINGS
@given(windows(), st.data())
def test_raising_a_budget_never_lowers_that_jobs_progress(
        case: tuple[list[Job], int, int], data: st.DataObject) -> None:
    jobs, gpus, rounds = case
    budgets = data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=len(jobs),
                                 max_size=len(jobs)), label="budgets")
    raised = data.draw(st.integers(0, len(jobs) - 1), label="job")
    factor = data.draw(st.sampled_from([1.5, 2.0, 4.0, 10.0]), label="factor")
    more = list(budgets)
    more[raised] *= factor
    before = solve(window(jobs, gpus, rounds, budgets), "convex")
    after = solve(window(jobs, gpus, rounds, more), "convex")
    slack = float(p_bound(before, jobs, budgets, rounds, [raised])[0]
                  + p_bound(after, jobs, more, rounds, [raised])[0])
    p_before = planned(before, len(jobs))[raised]
    p_after = planned(after, len(jobs))[raised]
    assert p_after >= p_before - slack, (p_before, p_after, slack)


# ------------------------------------------------------------------ (b) symmetry


@SETTINGS
@given(windows(min_jobs=0, max_jobs=2), st.integers(2, 3),
       st.tuples(st.integers(1, 2), st.integers(1, 12), st.integers(0, 11),
                 st.sampled_from([20, 60, 150])))
def test_identical_jobs_with_equal_budgets_get_equal_progress(
        others: tuple[list[Job], int, int], copies: int, twin: Job) -> None:
    rest, gpus, rounds = others
    s, epochs, done, t = twin
    twin = (min(s, gpus), epochs, min(done, epochs - 1), t)
    jobs = [twin] * copies + rest
    budgets = [1.0] * len(jobs)
    solution = solve(window(jobs, gpus, rounds), "convex")
    p = planned(solution, len(jobs))
    bound = p_bound(solution, jobs, budgets, rounds, list(range(copies)))
    for i in range(1, copies):
        assert abs(p[i] - p[0]) <= bound[0] + bound[i], (p[:copies], bound[:copies])


# ------------------------------------------------------------ (c) the objective


def shockwave_objective(jobs: list[Job], rounds_run: np.ndarray, rounds: int,
                        remaining_s: np.ndarray, pwl: bool) -> float:
    """Shockwave's window objective with every budget 1, written out here:
    sum_j log(progress_j) / (J W) - k max_j max(0, Rem_j - t_j p_j), progress_j =
    (e_j + p_j) / E_j, p_j = min(E_j - e_j, L n_j / t_j) for n_j rounds run."""
    total = 0.0
    worst_left = 0.0
    for (_s, epochs, done, t), n, rem in zip(jobs, rounds_run, remaining_s, strict=True):
        p = min(epochs - done, ROUND_S * n / t)
        progress = (done + p) / epochs
        if pwl:
            total += float(np.interp(progress, BREAKS, LOG_BREAKS))
        else:
            total += math.log(progress) if progress > 0 else -math.inf
        worst_left = max(worst_left, rem - t * p)
    return total / (len(jobs) * rounds) - K * worst_left


def remaining_by_hand(jobs: list[Job], predictor: str) -> np.ndarray:
    """Rem_j of a static job (module docstring): oracle (E - e) t, Shockwave (E - e - 1) t."""
    less = 0 if predictor == "oracle" else 1
    return np.array([(epochs - done - less) * t for _s, epochs, done, t in jobs], dtype=float)


@pytest.mark.parametrize("predictor", ["shockwave", "oracle"])
@pytest.mark.parametrize("mode", ["convex", "integral"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=windows())
def test_objective_is_shockwaves_with_unit_budgets(case: tuple[list[Job], int, int],
                                                   mode: str, predictor: str) -> None:
    jobs, gpus, rounds = case
    solution = solve(window(jobs, gpus, rounds), mode, predictor)
    rounds_run = np.array([solution.allocation[f"j{i}"]["v100"] * rounds
                           for i in range(len(jobs))])
    expected = shockwave_objective(jobs, rounds_run, rounds,
                                   remaining_by_hand(jobs, predictor), pwl=mode == "integral")
    assert solution.objective == pytest.approx(expected, rel=1e-9, abs=1e-12)
