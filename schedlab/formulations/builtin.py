"""The built-in formulation names, one table per paper, registered lazily.

:data:`GAVEL_FORMULATIONS`, :data:`SATURN_FORMULATIONS`, :data:`SHOCKWAVE_FORMULATIONS`,
:data:`TITAN_FORMULATIONS` and :data:`HARE_FORMULATIONS` hold one row per name:
``(name, "module:Class", description, keyword arguments of the variant)``.  The registry
(:data:`schedlab.registry.FORMULATIONS`) calls :func:`register_builtin_formulations` on first
use; the factories are strings, so listing the names imports no formulation module.  Every
Gavel name is also an online policy (:mod:`schedlab.policies.builtin` reads
:data:`GAVEL_FORMULATIONS`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schedlab.registry import Registry

#: One registered name: (name, "module:Class", description, variant keyword arguments).
Row = tuple[str, str, str, dict[str, Any]]

_GAVEL = "schedlab.formulations.gavel.models"
_HIERARCHICAL = "schedlab.formulations.gavel.hierarchical"
_SATURN = "schedlab.formulations.saturn.models"
_BASELINES = "schedlab.formulations.saturn.baselines"
_INTROSPECTIVE = "schedlab.formulations.saturn.introspective"

GAVEL_FORMULATIONS: tuple[Row, ...] = (
    ("gavel.max_min_fairness", f"{_GAVEL}:MaxMinFairness",
     "weighted max-min fairness over normalized effective throughput", {}),
    ("gavel.max_min_fairness_agnostic", f"{_GAVEL}:MaxMinFairness",
     "max-min fairness, heterogeneity-agnostic (Gavel's LAS baseline)",
     {"heterogeneity_aware": False}),
    ("gavel.max_min_fairness_packed", f"{_GAVEL}:MaxMinFairness",
     "max-min fairness with space sharing (co-located pairs)", {"space_sharing": True}),
    ("gavel.max_sum_throughput", f"{_GAVEL}:MaxSumThroughput",
     "maximize the sum of raw throughputs (cost=True: per dollar), with SLOs", {}),
    ("gavel.max_sum_throughput_agnostic", f"{_GAVEL}:MaxSumThroughput",
     "max sum throughput, heterogeneity-agnostic", {"heterogeneity_aware": False}),
    ("gavel.min_cost", f"{_GAVEL}:MaxSumThroughput",
     "maximize the sum of throughputs per dollar, T/c_k (Gavel's cost policy), with SLOs",
     {"cost": True}),
    ("gavel.max_sum_throughput_normalized", f"{_GAVEL}:MaxSumThroughput",
     "sum of throughputs, each job's divided by its best type's (not Gavel's policy: an option)",
     {"normalize": "best_type"}),
    ("gavel.min_cost_normalized", f"{_GAVEL}:MaxSumThroughput",
     "per-dollar throughput over s_j c_k, each job's divided by its best type's (an option)",
     {"cost": True, "normalize": "best_type"}),
    ("gavel.min_makespan", f"{_GAVEL}:MinMakespan",
     "minimize makespan as one LP in y = 1/makespan", {}),
    ("gavel.min_makespan_agnostic", f"{_GAVEL}:MinMakespan",
     "min makespan, heterogeneity-agnostic", {"heterogeneity_aware": False}),
    ("gavel.finish_time_fairness", f"{_GAVEL}:FinishTimeFairness",
     "finish-time fairness (Themis): minimize max rho by bisection on LP feasibility", {}),
    ("gavel.finish_time_fairness_agnostic", f"{_GAVEL}:FinishTimeFairness",
     "finish-time fairness, heterogeneity-agnostic", {"heterogeneity_aware": False}),
    ("gavel.fifo", f"{_GAVEL}:Fifo",
     "FIFO baseline: arrival order, fastest free accelerator first", {}),
    ("gavel.fifo_agnostic", f"{_GAVEL}:Fifo",
     "FIFO on the first free accelerator type (heterogeneity-agnostic)",
     {"heterogeneity_aware": False}),
    ("gavel.hierarchical", f"{_HIERARCHICAL}:Hierarchical",
     "hierarchical: max-min fairness across entities by water-filling", {}),
    ("gavel.hierarchical_fifo", f"{_HIERARCHICAL}:Hierarchical",
     "hierarchical: max-min fairness across entities, FIFO inside each entity",
     {"within": "fifo"}),
    ("gavel.hierarchical_agnostic", f"{_HIERARCHICAL}:Hierarchical",
     "hierarchical water-filling, heterogeneity-agnostic", {"heterogeneity_aware": False}),
)

SATURN_FORMULATIONS: tuple[Row, ...] = (
    ("saturn.time_indexed", f"{_SATURN}:TimeIndexed",
     "Saturn SPASE: time-indexed MILP (select parallelism, GPUs, node, start)", {}),
    ("saturn.time_indexed_wct", f"{_SATURN}:TimeIndexed",
     "Saturn time-indexed MILP minimizing weighted completion time",
     {"objective": "weighted_completion"}),
    ("saturn.disjunctive", f"{_SATURN}:Disjunctive",
     "Saturn SPASE: disjunctive big-M MILP with per-GPU assignment (paper style)", {}),
    ("saturn.current_practice", f"{_BASELINES}:SaturnHeuristic",
     "Saturn baseline: each job on all GPUs of one node, FIFO", {"rule": "current_practice"}),
    ("saturn.greedy", f"{_BASELINES}:SaturnHeuristic",
     "Saturn baseline: LPT list scheduling with the earliest-finishing configuration",
     {"rule": "greedy"}),
    ("saturn.random", f"{_BASELINES}:SaturnHeuristic",
     "Saturn baseline: random order and random configuration (seeded)", {"rule": "random"}),
    ("saturn.introspective", f"{_INTROSPECTIVE}:Introspective",
     "Saturn introspective scheduling: re-solve on the remaining work every interval, adopt "
     "clearly better plans (realized schedule in the instance's true runtimes)", {}),
)

_SHOCKWAVE_NASH = "schedlab.formulations.shockwave.nash:NashWelfare"

SHOCKWAVE_FORMULATIONS: tuple[Row, ...] = (
    ("shockwave.nash_welfare", _SHOCKWAVE_NASH,
     "Shockwave window: Nash welfare of progress, whole rounds, piecewise-linear log (MIP)",
     {"mode": "integral"}),
    ("shockwave.nash_welfare_convex", _SHOCKWAVE_NASH,
     "Shockwave window, convex: shares in [0, 1], exact log by outer approximation",
     {"mode": "convex"}),
)

_TITAN = "schedlab.formulations.titan"

TITAN_FORMULATIONS: tuple[Row, ...] = (
    ("titan.merge_offline", f"{_TITAN}.offline:MergeOffline",
     "Titan: merge compatible tasks and order the groups on the pool, min total weighted JCT "
     "(exact ILP)", {}),
    ("titan.round_ilp", f"{_TITAN}.round_ilp:RoundIlp",
     "Titan: one round's ILP, GPUs per task or merged pair (the public code's)", {}),
)

_HARE = "schedlab.formulations.hare"

HARE_FORMULATIONS: tuple[Row, ...] = (
    ("hare.exact", f"{_HARE}.exact_cpsat:ExactCpsat",
     "Hare: exact CP-SAT model (per-GPU circuits with switch gaps, barriers, arrivals; "
     "integer ticks, retimed in seconds; needs schedlab[cpsat])", {}),
    ("hare.exact_milp", f"{_HARE}.exact:Exact",
     "Hare: exact MILP for small instances (continuous time, immediate successors per GPU, "
     "switch gaps exact)", {}),
    ("hare.lp_bound", f"{_HARE}.lp_bound:HareLpBound",
     "Hare: interval-indexed LP lower bound on the total weighted completion time", {}),
    ("hare.greedy", f"{_HARE}.greedy:HareGreedy",
     "Hare: rounds in the LP order, each task on the GPU that ends it earliest", {}),
    ("hare.greedy_backfill", f"{_HARE}.greedy:HareGreedy",
     "Hare greedy with backfilling: a task may also fill an idle gap between placed tasks",
     {"backfill": True}),
    ("hare.sched_homo", f"{_HARE}.baselines:SchedHomo",
     "Hare baseline Sched_Homo: heterogeneity-oblivious list scheduling (types alike)", {}),
    ("hare.sched_allox", f"{_HARE}.baselines:SchedAllox",
     "Hare baseline Sched_Allox: one GPU type per job, a round never spread across types", {}),
)

BUILTIN_FORMULATIONS: tuple[Row, ...] = (GAVEL_FORMULATIONS + SATURN_FORMULATIONS
                                         + SHOCKWAVE_FORMULATIONS + TITAN_FORMULATIONS
                                         + HARE_FORMULATIONS)


def register_builtin_formulations(registry: Registry[Any]) -> None:
    """Register every row of :data:`BUILTIN_FORMULATIONS` into ``registry``."""
    for name, factory, description, defaults in BUILTIN_FORMULATIONS:
        registry.register(name, factory, description, **defaults)
