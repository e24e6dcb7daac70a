"""Round-based, event-driven cluster simulator that drives any policy (docs/simulator.md).

``simulate(jobs_or_instance, cluster, policy, round_s=360, mode="continuous")`` returns a
:class:`SimulationResult` with per-job records (``to_dataframe()``) and per-round placements.
See ``docs/simulator.md``.
"""

from schedlab.simulator.engine import (
    InvalidDecisionError,
    Progress,
    SimulationStalledError,
    jobs_from_instance,
    simulate,
)
from schedlab.simulator.result import JobRecord, RoundRecord, RunRecord, SimulationResult

__all__ = [
    "InvalidDecisionError",
    "JobRecord",
    "Progress",
    "RoundRecord",
    "RunRecord",
    "SimulationResult",
    "SimulationStalledError",
    "jobs_from_instance",
    "simulate",
]
