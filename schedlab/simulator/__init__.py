"""Round-based, event-driven cluster simulator that drives any policy (docs/simulator.md).

``simulate(jobs_or_instance, cluster, policy, round_s=360, mode="continuous")`` returns a
:class:`SimulationResult` with per-job records (``to_dataframe()``) and per-round placements.
See ``docs/simulator.md``.

:mod:`schedlab.simulator.nodes` is the node-level continuous mode for SPASE (Saturn) plans:
``simulate_nodes(NodeWorld.of(instance, data), plan, policy, interval_s, max_decisions)``
executes a plan at the instance's true runtimes, with checkpoints and restarts, asking a
:class:`NodePolicy` at every interval boundary.
"""

from schedlab.simulator.engine import (
    InvalidDecisionError,
    Progress,
    SimulationStalledError,
    jobs_from_instance,
    simulate,
)
from schedlab.simulator.nodes import NodePolicy, NodeWorld, Replan, simulate_nodes
from schedlab.simulator.result import JobRecord, RoundRecord, RunRecord, SimulationResult

__all__ = [
    "InvalidDecisionError",
    "JobRecord",
    "NodePolicy",
    "NodeWorld",
    "Progress",
    "Replan",
    "RoundRecord",
    "RunRecord",
    "SimulationResult",
    "SimulationStalledError",
    "jobs_from_instance",
    "simulate",
    "simulate_nodes",
]
