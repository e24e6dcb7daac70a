"""Sia (SOSP'23): heterogeneity- and adaptivity-aware scheduling by a round ILP over
configurations.

Each round Sia scores every adaptive job on a small set of configurations per GPU type
(``configs``: 1, 2, 4 (, 8) GPUs in one node, or whole nodes), normalises each job's goodputs
by its smallest (``matrix``), raises them to a power p (-0.5 in the paper's runs) and picks at
most one configuration per job under each type's GPU capacity (``ilp``), then hands out GPUs
node by node (``placement``).  Written from the authors' code (siasosp23/artifacts at
aaf7a0d, ``sia-simulator/sia.py``); each module cites the lines it follows.
"""

from schedlab.formulations.sia.configs import (
    CONFIGS_4GPU,
    CONFIGS_8GPU,
    DEFAULT_CLUSTER,
    MAX_PHYSICAL_NODES,
    Config,
    ConfigSet,
    configs_of,
    sia_configs,
    type_configs,
)
from schedlab.formulations.sia.ilp import (
    DEFAULT_LAMBDA_N,
    DEFAULT_P,
    SIA_MIP_GAP,
    TIE_BREAK_MODULUS,
    TIE_BREAK_SLACK,
    UTILITY_CLIP,
    RigidJobs,
    SiaDecision,
    SiaProblem,
    rigid_jobs,
    sia_problem,
    solve_sia_ilp,
    tie_break_weights,
    utilities,
)
from schedlab.formulations.sia.matrix import (
    DEFAULT_RESTART_PENALTY_S,
    RESTART_PENALTY_S,
    ZERO_ALLOC_GAIN,
    AdaptiveJob,
    GoodputFn,
    goodput_matrix,
    model_goodput_fn,
    realloc_factor,
    restart_penalty_s,
)
from schedlab.formulations.sia.placement import alloc_to_placement_fast

__all__ = [
    "CONFIGS_4GPU", "CONFIGS_8GPU", "DEFAULT_CLUSTER", "DEFAULT_LAMBDA_N", "DEFAULT_P",
    "DEFAULT_RESTART_PENALTY_S", "MAX_PHYSICAL_NODES", "RESTART_PENALTY_S", "SIA_MIP_GAP",
    "TIE_BREAK_MODULUS", "TIE_BREAK_SLACK", "UTILITY_CLIP", "ZERO_ALLOC_GAIN", "AdaptiveJob",
    "Config", "ConfigSet", "GoodputFn", "RigidJobs", "SiaDecision", "SiaProblem",
    "alloc_to_placement_fast", "configs_of", "goodput_matrix", "model_goodput_fn",
    "realloc_factor", "restart_penalty_s", "rigid_jobs", "sia_configs", "sia_problem",
    "solve_sia_ilp", "tie_break_weights", "type_configs", "utilities",
]
