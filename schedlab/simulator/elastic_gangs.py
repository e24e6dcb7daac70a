"""Fixed-gang policies in the elastic mode: SRTF, Tiresias, ... on Titan's tasks.

:class:`FixedGangs` wraps any :class:`~schedlab.policies.base.Policy` of the round engine so
that :func:`~schedlab.simulator.elastic.simulate_elastic` can run it in Titan's world (the same
switch costs and rounds as Titan): every round it shows the policy a
:class:`~schedlab.policies.state.ClusterState` with one :class:`~schedlab.policies.state.JobState`
per active task and turns each :class:`~schedlab.policies.state.Assignment` into a grant of the
task's requested GPUs.  The task's ``JobState``:

* ``scale_factor`` = its request g, ``total_steps`` = 1 (progress is the fraction done, so
  ``steps_done`` = phi) and ``throughput`` {type: 1 / d(g)} (fractions per second on its g
  GPUs), so R / T is the remaining time at the request, what SRTF ranks by;
* ``attained_service_s`` = GPU-seconds held so far (switches included, as the engine counts
  them; Tiresias' 2D age), ``executed_s``, ``rounds_run``, ``start_time``,
  ``last_round_run``, ``last_accelerator``, ``last_gpu_ids``, ``preemptions`` and
  ``migrations`` (switches after the first start) from the task's unit.

Such policies never merge, and a co-located pair (``partner``) is refused as an invalid
decision: Titan's world has no space sharing.  ``ClusterState.finished`` lists the finished
tasks' JobStates in finish order.
"""

from __future__ import annotations

from schedlab.formulations.titan.speed import duration
from schedlab.placement import mask_ids
from schedlab.policies.base import Policy
from schedlab.policies.elastic_state import ElasticState, Grant, UnitState
from schedlab.policies.state import ClusterState, JobState
from schedlab.simulator.engine import InvalidDecisionError


class FixedGangs:
    """An elastic-mode policy that runs ``policy`` with every task on the GPUs it requested
    (module docstring).  ``pipelined_switch`` is False: the baselines have no pipelined
    switch."""

    pipelined_switch = False

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.name = policy.name or type(policy).__name__
        self._jobs: dict[str, JobState] = {}

    # counters of the wrapped policy (the simulator reads them)
    @property
    def solver_time_s(self) -> float:
        """The wrapped policy's solver seconds."""
        return self.policy.solver_time_s

    @property
    def solves(self) -> int:
        """The wrapped policy's solves."""
        return self.policy.solves

    @property
    def decisions(self) -> int:
        """The wrapped policy's decisions."""
        return self.policy.decisions

    @property
    def failed_solves(self) -> int:
        """The wrapped policy's failed solves."""
        return self.policy.failed_solves

    def reset(self) -> None:
        """A new run: the wrapped policy's reset, and no task remembered."""
        self.policy.reset()
        self._jobs = {}

    def plan(self, state: ElasticState) -> list[Grant]:
        """Ask the wrapped policy; each of its assignments becomes a grant of the request."""
        active = [self._job(unit, state) for unit in state.units]
        finished = [self._jobs[task] for task in state.finished if task in self._jobs]
        for job in finished:
            job.steps_done = job.total_steps
        view = ClusterState(now=state.now, round_index=state.round_index,
                            round_s=state.round_s, cluster=state.cluster, active=active,
                            finished=finished, job_set_version=state.version, seed=state.seed)
        grants = []
        for a in self.policy.decide(view):
            if a.partner is not None:
                raise InvalidDecisionError(
                    f"policy {self.name!r}, round {state.round_index}: co-locates {a.job!r} "
                    f"with {a.partner!r}, but Titan's tasks do not share GPUs")
            known = self._jobs.get(a.job)
            if known is None:
                raise InvalidDecisionError(f"policy {self.name!r}, round {state.round_index}: "
                                           f"job {a.job!r} is unknown or not active")
            grants.append(Grant((a.job,), known.scale_factor))
        return grants

    def _job(self, unit: UnitState, state: ElasticState) -> JobState:
        """The JobState of a single-task unit, created once and refreshed from the unit."""
        if unit.merged:
            raise InvalidDecisionError(f"policy {self.name!r} cannot run merged pair "
                                       f"{unit.id!r}")
        spec = state.tasks[unit.id]
        job = self._jobs.get(unit.id)
        if job is None:
            seconds = duration(spec.task.duration_s, spec.requested_gpus)
            job = JobState(id=unit.id, arrival=spec.task.arrival,
                           scale_factor=spec.requested_gpus, total_steps=1.0,
                           throughput={state.accelerator: 1.0 / seconds},
                           weight=spec.task.weight, job_type=spec.job_type)
            self._jobs[unit.id] = job
        job.steps_done = min(unit.done, 1.0 - 1e-12)
        job.attained_service_s = unit.gpu_seconds
        job.executed_s = unit.executed_s
        job.time_on = {state.accelerator: unit.executed_s}
        job.rounds_run = unit.rounds_run
        job.start_time = unit.start_time
        job.last_round_run = unit.last_round_run
        job.preemptions = unit.preemptions
        job.migrations = max(unit.switches - 1, 0)
        if unit.mask:
            job.last_accelerator = state.accelerator
            job.last_gpu_ids = mask_ids(unit.mask)
        return job
