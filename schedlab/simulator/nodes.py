"""The simulator's node-level continuous mode for SPASE (Saturn) plans: re-exported from
:mod:`schedlab.formulations.saturn.execution`, where it lives.

Saturn's introspective formulation and its re-planning MILP run this mode, and formulations
never import the simulator (docs/architecture.md, "Layers"), so the code sits with Saturn's
formulations; this module keeps the simulator's name for it.
"""

from schedlab.formulations.saturn.execution import (
    EPS,
    Execution,
    NodePolicy,
    NodeWorld,
    Plan,
    PlanItem,
    Replan,
    Running,
    Runtime,
    Segment,
    advance,
    estimated_runtime,
    execute,
    plan_from_schedule,
    predict,
    restart_cost,
    runtime_factors,
    scaled_data,
    scaled_runtime,
    simulate_nodes,
)

__all__ = [
    "EPS",
    "Execution",
    "NodePolicy",
    "NodeWorld",
    "Plan",
    "PlanItem",
    "Replan",
    "Running",
    "Runtime",
    "Segment",
    "advance",
    "estimated_runtime",
    "execute",
    "plan_from_schedule",
    "predict",
    "restart_cost",
    "runtime_factors",
    "scaled_data",
    "scaled_runtime",
    "simulate_nodes",
]
