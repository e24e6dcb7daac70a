"""Pollux (OSDI'21): goodput-adaptive allocation of GPUs by a genetic search per round.

Each round Pollux searches per-node replica counts for every job with NSGA-II, maximising a
p = -1 power mean of the jobs' restart-penalised speedups over their fair share (and, as a
second objective, the cluster utility), seeded with the previous round's non-dominated
front.  Written from the authors' simulator (petuum/adaptdl, branch ``osdi21-artifact`` at
c793c70, ``simulator/pollux.py``, Apache-2.0) and pymoo 0.4.2.1's NSGA-II, which it calls;
this package re-implements both with numpy, randomness from a seeded generator.

Modules: ``fitness`` (objectives, fair-share speedups, the per-round speedup table),
``operators`` (crossover, mutation, repair), ``nsga2`` (the genetic algorithm as pymoo
0.4.2.1 runs it) and ``search`` (one round: :func:`pollux_search`).
"""

from schedlab.formulations.pollux.fitness import (
    FairShare,
    JobGoodput,
    PolluxObjectives,
    SpeedupFunction,
    SpeedupTable,
    fair_share,
    fair_share_speedups,
    goodput_speedup,
    linear_speedup,
    restart_factor,
)
from schedlab.formulations.pollux.nsga2 import (
    GeneticProblem,
    NSGA2Result,
    crowding_distance,
    non_dominated_fronts,
    nsga2,
    rank_and_crowding_survival,
)
from schedlab.formulations.pollux.operators import crossover, mutate, repair
from schedlab.formulations.pollux.search import (
    PolluxJob,
    PolluxProblem,
    PolluxRound,
    carry_front,
    pollux_job_order,
    pollux_search,
)

__all__ = [
    "FairShare",
    "GeneticProblem",
    "JobGoodput",
    "NSGA2Result",
    "PolluxJob",
    "PolluxObjectives",
    "PolluxProblem",
    "PolluxRound",
    "SpeedupFunction",
    "SpeedupTable",
    "carry_front",
    "crossover",
    "crowding_distance",
    "fair_share",
    "fair_share_speedups",
    "goodput_speedup",
    "linear_speedup",
    "mutate",
    "non_dominated_fronts",
    "nsga2",
    "pollux_job_order",
    "pollux_search",
    "rank_and_crowding_survival",
    "repair",
    "restart_factor",
]
