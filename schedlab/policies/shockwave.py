r"""Shockwave (Zheng et al., NSDI'23) as an online policy: plan a window, follow the plan.

Shockwave's scheduler (``scheduler/shockwave.py`` and the Shockwave parts of
``scheduler/scheduler.py`` in github.com/uw-mad-dash/shockwave) re-plans W future rounds
(``window_rounds``, 20) of its window problem (:class:`~schedlab.formulations.shockwave.nash.
NashWelfare`) and runs the plan round by round.  This policy does the same, step for step:

**When it re-plans** (``round_schedule`` / ``_update_shockwave_scheduler``): on a round where
a job arrived (``add_metadata`` calls ``set_resolve``), where a job completed
(``remove_metadata``, called from ``scheduler.py``'s completion path, also calls
``set_resolve``), or where the round counter reached ``reopt_rounds`` (8,
``REOPT_ROUNDS``); also when the plan has no entry for the round.  The counter counts every
round and is reset only when it fires (``_iround_reopt`` in ``scheduler.py:
_update_shockwave_scheduler``: the ``_shockwave_job_completed_flag`` that would also reset it
is never set in simulation), so re-plans on arrivals and completions leave it running.
``reset_counter_on_completion=True`` (our option) also resets it when a job completes.
Between re-plans the policy returns the plan's round as it stands.

**Finish-time targets** (``finish_time_uniform_share``, ``finish_time_momentumed_average``):
whenever the job set changed since the last re-plan (an arrival or a completion; the
8-round re-plans record nothing), every job's finish time under an equal share is recorded,

.. math::

    F_j = t^{submit}_j + \bigl(\textstyle\sum_{e < e_j} t_e + Rem_j\bigr) / \varphi,
    \qquad \varphi = \min(1, G/J),

with t^submit the round start at which the policy first saw the job, t_e the profiled seconds
of epoch e (whole seconds, as the code's profile), Rem_j the predictor's remaining seconds and
J the active jobs.  The target is FT_j = 0.9 avg + 0.1 F_last, where avg weights each recorded
value by the rounds it was in force (the last one up to the current round).

**The solve.**  The window problem with its finish-time rows (now + L W + u_j / phi <=
rho_max FT_j; ``now`` is the simulated clock, which is the code's L r when every round lasts
L).  When it is infeasible, the rows are dropped, each job's log term is multiplied by
priority_j = rho_j^lambda if rho_j > rho_max (rho_j^100 when Rem_j < L), else 1, with
rho_j = (now + Rem_j / phi) / FT_j (``relax_finish_time_constraints``), the problem is solved
again, and the rounds are re-placed by :func:`~schedlab.formulations.shockwave.rounds.
rerank_rounds` (``rank_in_schedule_jobs``).  Finally every round's idle GPUs are filled by
:func:`~schedlab.formulations.shockwave.rounds.fill_idle_gpus` (``construct_schedules``).

``mode="integral"`` is the paper's MILP (piecewise-linear log, 0/1 rounds);
``mode="convex"`` our exact variant (exact log by outer approximation, rounded gangs; the
re-placement then acts on the rounded gangs).

**Profile calibration** (``calibrate_profiles``, on: the code's).  Before every use of a job's
profile (targets, d_j, Rem_j, priorities) Shockwave's ``JobMetaData.
calibrate_profiled_epoch_duration`` compares what the job ran with what its profile predicts
over the same time and, beyond 40%, scales every profiled epoch time
(:mod:`~schedlab.formulations.shockwave.calibration`).  The policy records the code's
throughput timeline -- per global round the job ran, the epochs it made, at the rate it ran
(a round's resume or switch overhead excluded, as the code measures steps over the execution
time less the overhead) -- and hands the factors to the window problem as ``duration_scale``.

**Honest fallbacks.**  A solve that ends with no plan for another reason than infeasibility
(an error, a time limit without incumbent) counts in ``failed_solves``, is logged, and the
round plan is the idle-GPU fill alone (Shockwave's code would stop there).  A failed
re-placement keeps the relaxed plan, as the code does.

**Large priorities, as they stand.**  Shockwave's predictor says 0 s remain for a job on the
last epoch of a single-regime schedule (it counts the epoch about to run as observed), so
such a job gets rho_j^100 as soon as now exceeds its target: 1e20 and more within a few
rounds.  The objective goes to the solver as the code writes it, c_j = pi_j / (W J) with no
rescaling (``relax_finish_time_constraints`` multiplies the log utilities, the solver gets
them as they are); HiGHS's ``infinite_cost`` limit is lifted so that such a coefficient is a
number, not an infinity.  Every other job keeps its own weight 1 / (W J), so its share is
still optimized.  A priority that overflows float64 (rho^100 above ~1.8e308; Shockwave's code
then hands ``inf`` to the solver and fails) is not reweighted: the relaxed re-solve counts
as a failed solve, the warning names the jobs, and the round plan is the idle-GPU fill
alone.  ``priority_cap`` (our option, off by default) caps the priorities explicitly.

**What it reads.**  Each job's epochs done (whole epochs of ``steps_done``), scale factor,
weight (the budget B_j) and its ``batch_schedule`` and ``regimes`` -- the full schedule, which
Shockwave's predictor reads (its peeks, docs/formulations/shockwave.md; ``predictor=
"non_peeking"`` avoids them).  One accelerator type, as Shockwave's cluster.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from schedlab.errors import InputError
from schedlab.formulations.shockwave.calibration import calibrated_scale
from schedlab.formulations.shockwave.nash import NashMode, NashWelfare, WindowData
from schedlab.formulations.shockwave.predictor import (
    PredictorMode,
    epoch_profile,
    remaining_seconds,
)
from schedlab.formulations.shockwave.rounds import fill_idle_gpus, rerank_rounds
from schedlab.instance import AcceleratorPool, Cluster, Instance, Job, Params
from schedlab.policies.base import Policy
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.solution import Solution, Status
from schedlab.solvers import SolverOptions

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]

#: Shockwave's defaults: W future rounds, re-plan every 8 rounds, k per second, lambda, rho_max.
WINDOW_ROUNDS = 20
REOPT_ROUNDS = 8
MOMENTUM = 0.9
#: Exponent of the priority of a job that is about to finish (Rem_j < L) (``priority_M``).
NEAR_FINISH_POWER = 100.0


def momentum_finish_time(series: Sequence[tuple[int, float]], round_index: int,
                         momentum: float = MOMENTUM) -> float:
    """Shockwave's ``finish_time_momentumed_average``: each recorded (round, value) weighs the
    rounds until the next record (the last until ``round_index``); the result is
    momentum x that average + (1 - momentum) x the latest value.  All weights 0 (one record
    made this round): the average is that record."""
    if not series:
        raise ValueError("no finish time recorded")
    rounds = np.array([r for r, _ in series] + [round_index], dtype=float)
    values = np.array([v for _, v in series], dtype=float)
    spans = np.diff(rounds)
    if spans.max() <= 0:
        average = float(values[-1]) if len(values) == 1 else float(values.mean())
    else:
        average = float(spans @ values / spans.sum())
    return momentum * average + (1.0 - momentum) * float(values[-1])


def relaxed_priorities(now: float, remaining_s: FloatArray, targets: FloatArray, phi: float,
                       round_s: float, rho_max: float, lam: float) -> FloatArray:
    """priority_j = rho_j^lambda when rho_j > rho_max (rho_j^100 when Rem_j < L), else 1, with
    rho_j = (now + Rem_j / phi) / FT_j (``relax_finish_time_constraints``).  A power that
    overflows float64 is ``inf`` (never capped here: the caller says so).  A target of 0 s
    gives rho = inf (or NaN when the numerator is 0 too, which is not above rho_max), as the
    code's numpy division does."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = (now + remaining_s / phi) / targets
    power = np.where(remaining_s < round_s, NEAR_FINISH_POWER, lam)
    with np.errstate(over="ignore"):
        raised = np.power(rho, power)
    return np.where(rho > rho_max, raised, 1.0)


class Shockwave(Policy):
    """Shockwave's online scheduler (module docstring).

    Args:
        mode: ``integral`` (the paper's MILP) or ``convex`` (exact log, rounded).
        k: weight of the longest predicted remaining time, per second (1e-3).
        rho_max: finish-time-fairness threshold of the rows and the priorities (1).
        lam: the priorities' exponent lambda (12).
        window_rounds: W (20).
        reopt_rounds: re-plan at least every this many rounds (8).
        predictor: ``shockwave`` (the code's, with its peeks), ``non_peeking`` or ``oracle``.
        finish_time_rows: False drops the finish-time rows (plain Nash welfare).
        priority_cap: None (Shockwave's code) or the largest priority of the relaxed re-solve
            (our option, e.g. 1e6: see "Large priorities" in the module docstring).
        reset_counter_on_completion: also reset the 8-round counter when a job completes
            (our option; Shockwave's code resets it only when it fires).
        calibrate_profiles: Shockwave's profile calibration (module docstring; True, the
            code's); False plans with the profile as given.
        options: solver options (HiGHS by default; the integral mode's MIP gap 1e-3 and time
            limit 15 s unless set here).
    """

    name = "shockwave"
    description = "Shockwave: Nash welfare of progress over a 20-round window, re-planned"
    workload_kind = "shockwave"
    reads_batch_schedule = True

    def __init__(self, mode: NashMode = "integral", *, k: float = 1e-3, rho_max: float = 1.0,
                 lam: float = 12.0, window_rounds: int = WINDOW_ROUNDS,
                 reopt_rounds: int = REOPT_ROUNDS, predictor: PredictorMode = "shockwave",
                 finish_time_rows: bool = True, priority_cap: float | None = None,
                 reset_counter_on_completion: bool = False,
                 calibrate_profiles: bool = True,
                 options: SolverOptions | None = None) -> None:
        super().__init__()
        if mode not in ("integral", "convex"):
            raise InputError(f"unknown mode {mode!r} (integral or convex)", field="mode")
        for field, value in (("window_rounds", window_rounds), ("reopt_rounds", reopt_rounds)):
            if not (isinstance(value, int) and value >= 1):
                raise InputError(f"must be an integer >= 1, got {value!r}", field=field)
        if not (math.isfinite(k) and k >= 0):
            raise InputError(f"must be >= 0, got {k!r}", field="k")
        if not (math.isfinite(rho_max) and rho_max > 0):
            raise InputError(f"must be > 0, got {rho_max!r}", field="rho_max")
        self.mode: NashMode = mode
        self.k = k
        self.rho_max = rho_max
        self.lam = lam
        self.window_rounds = window_rounds
        self.reopt_rounds = reopt_rounds
        self.predictor: PredictorMode = predictor
        self.finish_time_rows = finish_time_rows
        if priority_cap is not None and not (math.isfinite(priority_cap) and priority_cap >= 1):
            raise InputError(f"must be a number >= 1 or None, got {priority_cap!r}",
                             field="priority_cap")
        self.priority_cap = priority_cap
        self.reset_counter_on_completion = reset_counter_on_completion
        self.calibrate_profiles = calibrate_profiles
        self.options = options
        if mode == "convex":
            self.name = "shockwave_convex"
        self.reset()

    def reset(self) -> None:
        """Forget the plan, the targets and the jobs seen."""
        super().reset()
        self._jobs: dict[str, Job] = {}  # the job as the formulation reads it (epochs_done 0)
        self._submit: dict[str, float] = {}  # s, the round start at which a job was first seen
        self._series: dict[str, list[tuple[int, float]]] = {}
        self._plan: dict[int, list[str]] = {}
        self._resolve = True
        self._reestimate = True
        self._since_reopt = 0
        self._last_round: int | None = None
        self.relaxed_solves = 0  # re-plans whose finish-time rows were infeasible
        self.overflowed_priorities = 0  # relaxed re-solves skipped: a priority overflowed
        self._progress: dict[str, float] = {}  # epochs done when last seen
        self._overhead: dict[str, float] = {}  # overhead seconds paid when last seen
        self._timeline: dict[str, list[tuple[int, float]]] = {}  # (round, epochs run in it)
        self._scale: dict[str, float] = {}  # the profile calibration in force, per job
        self.statuses: list[Status] = []  # every window solve's status, in order

    # ------------------------------------------------------------------ decide
    def decide(self, state: ClusterState) -> list[Assignment]:
        """The plan's gangs for this round, re-planning first when due."""
        self.decisions += 1
        acc, gpus = self._pool(state)
        r = state.round_index
        active_ids = [js.id for js in state.active]
        arrived = [js for js in state.active if js.id not in self._jobs]
        completed = set(self._jobs) - set(active_ids)
        if self._last_round is not None and r != self._last_round:
            self._since_reopt += 1
        self._last_round = r
        for js in arrived:
            self._jobs[js.id] = self._job(js)
            self._submit[js.id] = state.now
        for job_id in completed:
            del self._jobs[job_id]
            self._series.pop(job_id, None)
            for memory in (self._progress, self._overhead, self._timeline, self._scale):
                memory.pop(job_id, None)
        if self.calibrate_profiles:
            self._measure(state)
        if self._since_reopt >= self.reopt_rounds or (
                completed and self.reset_counter_on_completion):
            self._resolve = True
            self._since_reopt = 0
        if arrived or completed:  # add_metadata / remove_metadata call set_resolve
            self._resolve = True
        if arrived or completed:
            self._reestimate = True
        if self._resolve or r not in self._plan:
            self._replan(state, acc, gpus)
        running = set(active_ids)
        return [Assignment(job_id, acc) for job_id in self._plan.get(r, []) if job_id in running]

    @staticmethod
    def _pool(state: ClusterState) -> tuple[str, int]:
        pools = [(k, p.count) for k, p in state.cluster.accelerators.items() if p.count > 0]
        if len(pools) != 1:
            raise InputError("Shockwave schedules one accelerator type; the cluster has "
                             f"{dict(pools)}", field="cluster.accelerators")
        return pools[0]

    @staticmethod
    def _job(js: JobState) -> Job:
        if js.batch_schedule is None or js.regimes is None:
            raise InputError(f"job {js.id}: Shockwave needs epochs, batch_schedule and regimes "
                             "(a dynamic-adaptation job)", field="jobs")
        # the types it can run on (positive throughput): the window problem plans only
        # those; the simulator admits no job without one
        return Job(id=js.id, epochs=len(js.batch_schedule), weight=js.weight,
                   scale_factor=js.scale_factor, batch_schedule=list(js.batch_schedule),
                   regimes={str(b): t for b, t in js.regimes.items()},
                   throughput={k: v for k, v in js.throughput.items() if v > 0})

    # ------------------------------------------------------------------ calibration
    def _measure(self, state: ClusterState) -> None:
        """Add the round just run to the timeline of every job that ran in it (Shockwave's
        throughput timeline, keyed by the global round index): the epochs it made then, at
        the rate it ran -- epochs / (L - o) x L when o seconds of the round went to a resume
        or switch overhead, since the code measures steps over the execution time less the
        overhead (``scheduler.py`` lines 1965-1968)."""
        r = state.round_index
        length = state.round_s
        for js in state.active:
            before = self._progress.get(js.id, js.steps_done)
            lost = js.overhead_s - self._overhead.get(js.id, js.overhead_s)
            if r > 0 and js.last_round_run == r - 1 and length - lost > 0:
                made = (js.steps_done - before) * length / (length - lost)
                self._timeline.setdefault(js.id, []).append((r - 1, made))
            self._progress[js.id] = js.steps_done
            self._overhead[js.id] = js.overhead_s

    def _calibrate(self, round_s: float) -> dict[str, float]:
        """Every active job's calibration factor, recomputed from its timeline (Shockwave
        calls ``calibrate_profiled_epoch_duration`` before every use of the profile)."""
        if not self.calibrate_profiles:
            return {}
        for job_id, job in self._jobs.items():
            self._scale[job_id] = calibrated_scale(
                epoch_profile(job).seconds, self._timeline.get(job_id, []), round_s,
                self._scale.get(job_id, 1.0))
        return {j: v for j, v in self._scale.items() if v != 1.0}

    # ------------------------------------------------------------------ planning
    def _window(self, state: ClusterState, acc: str, gpus: int) -> Instance:
        jobs = [self._jobs[js.id].model_copy(update={"epochs_done": js.epochs_done})
                for js in state.active]
        return Instance(name=f"shockwave-round-{state.round_index}",
                        cluster=Cluster(accelerators={acc: AcceleratorPool(count=gpus)}),
                        jobs=jobs,
                        params=Params(round_s=state.round_s, window_rounds=self.window_rounds,
                                      now_s=state.now))

    def _record_targets(self, window: Instance, round_index: int, gpus: int,
                        scale: dict[str, float]) -> None:
        """Append every job's equal-share finish time to its series (module docstring)."""
        phi = min(1.0, gpus / max(1, len(window.jobs)))
        for job in window.jobs:
            profile = epoch_profile(job)
            done = float(profile.seconds[: job.epochs_done].sum())
            rem = remaining_seconds(job, mode=self.predictor)
            value = self._submit[job.id] + scale.get(job.id, 1.0) * (done + rem) / phi
            self._series.setdefault(job.id, []).append((round_index, value))

    def _solve(self, formulation: NashWelfare, window: Instance) -> Solution:
        t0 = time.perf_counter()
        try:
            return formulation.solve(window, self.options)
        finally:
            self.solver_time_s += time.perf_counter() - t0
            self.solves += 1

    def _replan(self, state: ClusterState, acc: str, gpus: int) -> None:
        window = self._window(state, acc, gpus)
        r = state.round_index
        targets: dict[str, float] = {}
        scale = self._calibrate(state.round_s)
        if self.finish_time_rows:
            if self._reestimate:
                self._record_targets(window, r, gpus, scale)
                self._reestimate = False
            targets = {j.id: momentum_finish_time(self._series[j.id], r) for j in window.jobs}
        first = NashWelfare(self.mode, k=self.k, predictor=self.predictor,
                            finish_time_targets=targets or None, rho_max=self.rho_max,
                            duration_scale=scale)
        solution = self._solve(first, window)
        self.statuses.append(solution.status)
        data = first.window_data(window)
        n, w = len(data.ids), data.rounds
        gangs = np.zeros((n, w))
        if solution.status.has_solution:
            gangs = self._gangs(solution, data)
        elif solution.status is Status.INFEASIBLE and targets:
            gangs = self._relaxed(window, data, targets, state, scale)
        else:
            self.failed_solves += 1
            log.warning("shockwave round %d: the window solve ended %s (%s); the round plan "
                        "is the idle-GPU fill alone", r, solution.status.value,
                        "; ".join(solution.diagnostics) or "no diagnostics")
        filled = fill_idle_gpus(gangs, data.scale, gpus, data.remaining_s)
        self._plan = {r + t: [data.ids[j] for j in range(n) if filled[j, t] > 0.5]
                      for t in range(w)}
        self._resolve = False

    def _relaxed(self, window: Instance, data: WindowData, targets: dict[str, float],
                 state: ClusterState, scale: dict[str, float] | None = None) -> FloatArray:
        """Drop the finish-time rows, re-solve with priorities, re-place (module docstring)."""
        self.relaxed_solves += 1
        phi = min(1.0, data.gpus / max(1, len(data.ids)))
        target = np.array([targets[j] for j in data.ids])
        priority = relaxed_priorities(state.now, data.remaining_s, target, phi, data.round_s,
                                      self.rho_max, self.lam)
        if self.priority_cap is not None:  # our option: keep priorities representable
            priority = np.minimum(priority, self.priority_cap)
        if not np.all(np.isfinite(priority)):
            self.failed_solves += 1
            self.overflowed_priorities += 1
            over = [data.ids[j] for j in np.flatnonzero(~np.isfinite(priority))]
            log.warning("shockwave round %d: the priority rho^power of job(s) %s overflows "
                        "float64; the relaxed re-solve is not attempted (no reweighting), the "
                        "round plan is the idle-GPU fill alone (priority_cap caps them)",
                        state.round_index, ", ".join(over))
            return np.zeros((len(data.ids), data.rounds))
        second = NashWelfare(self.mode, k=self.k, predictor=self.predictor,
                             priorities=dict(zip(data.ids, priority.tolist(), strict=True)),
                             duration_scale=scale)
        solution = self._solve(second, window)
        self.statuses.append(solution.status)
        if not solution.status.has_solution:
            self.failed_solves += 1
            log.warning("shockwave round %d: the relaxed re-solve ended %s; the round plan is "
                        "the idle-GPU fill alone", state.round_index, solution.status.value)
            return np.zeros((len(data.ids), data.rounds))
        gangs = self._gangs(solution, data)
        t0 = time.perf_counter()
        placed, result = rerank_rounds(gangs, data.scale, data.gpus, priority, self.options)
        self.solver_time_s += time.perf_counter() - t0
        self.solves += 1
        self.statuses.append(result.status)
        if not result.status.has_solution:
            self.failed_solves += 1
            log.warning("shockwave round %d: re-placement ended %s; keeping the relaxed plan",
                        state.round_index, result.status.value)
        return placed

    @staticmethod
    def _gangs(solution: Solution, data: WindowData) -> FloatArray:
        """y[j,t] from the solution's whole-gang rounds."""
        index = {job_id: j for j, job_id in enumerate(data.ids)}
        y = np.zeros((len(data.ids), data.rounds))
        for t, placements in enumerate(solution.rounds or []):
            for p in placements:
                y[index[p.job], t] = 1.0
        return y

__all__ = ["Shockwave", "momentum_finish_time", "relaxed_priorities"]
