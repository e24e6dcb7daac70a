"""The policy interface: read the simulator's state, decide the coming round.

``decide(state) -> list[Assignment]`` returns which jobs run as whole gangs on which
accelerator type during the next round.  The simulator checks the decision (no more GPUs than
exist per type, whole gangs, each job once), chooses GPU ids (placement step) and advances
time.  A policy keeps whatever memory it needs between rounds; it never changes the state.

One policy object may serve several runs: the simulator calls :meth:`Policy.reset` at the
start of every run, which clears the counters; a policy with memory between rounds (queues,
leases, a random stream, a cached model) overrides it to clear that memory too, so a run
after ``reset()`` decides exactly as a fresh policy would.  ``schedlab.testing.check_policy``
checks it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from schedlab.policies.state import Assignment, ClusterState


class Policy(ABC):
    """Base class of online policies.  ``solver_time_s`` and ``decisions`` feed the metrics."""

    name: str = ""
    description: str = ""
    #: the jobs the policy schedules: ``"gavel"`` (any job with throughputs) or
    #: ``"shockwave"`` (dynamic-adaptation jobs on one type); ``schedlab.testing`` picks its
    #: workload by it
    workload_kind: str = "gavel"
    #: whether ``decide`` reads ``state.finished``; a policy that does not may say False, so
    #: a streaming simulation (``simulate(..., keep_jobs=False)``) forgets finished jobs
    uses_finished_jobs: bool = True
    #: whether ``decide`` reads ``state.arrays`` (:class:`~schedlab.policies.state.ActiveArrays`,
    #: columns of the active jobs); the simulator keeps them only for policies that say True
    uses_arrays: bool = False
    #: whether ``decide`` reads dynamic jobs' ``batch_schedule`` and ``regimes`` (Shockwave's
    #: policy); the simulator then keeps such jobs counted in epochs under
    #: ``mechanism="gavel"`` instead of Shockwave's step rule (``simulate(shockwave_steps=)``)
    reads_batch_schedule: bool = False
    #: whether ``decide`` reads the progress of the active JobStates (``steps_done``,
    #: ``executed_s``, ``attained_service_s``, ``time_on``, ``rounds_run``,
    #: ``last_round_run``); a policy that does not may say False, and the simulator's array
    #: path then writes them back only when a job finishes (docs/simulator.md)
    reads_progress: bool = True

    def __init__(self) -> None:
        self.solver_time_s = 0.0  # seconds spent in optimization solvers
        self.solves = 0  # optimization problems solved
        self.decisions = 0  # rounds decided
        self.failed_solves = 0  # solves that found no solution (the policy fell back)

    def reset(self) -> None:
        """Start afresh for a new run: zero the counters.  Policies that keep memory between
        rounds override this (calling ``super().reset()``) to clear it as well."""
        self.solver_time_s = 0.0
        self.solves = 0
        self.decisions = 0
        self.failed_solves = 0

    @abstractmethod
    def decide(self, state: ClusterState) -> list[Assignment]:
        """Assignments for the round starting at ``state.now``."""
