"""Hare (HPDC'22): total weighted completion time of round-based data-parallel jobs on
heterogeneous GPUs, a round's tasks spread over GPU types, with switch costs.

Modules: ``model`` (the instance in arrays, a task schedule, sum_j w_j C_j and the Solution
of a schedule: the shared API), ``lp_bound`` (``hare.lp_bound``: an interval-indexed LP
whose optimum is a lower bound and whose fractional completion times order the jobs),
``greedy`` (``hare.greedy``: list scheduling in the LP order, each task on the GPU that
finishes it earliest), ``exact_cpsat`` (``hare.exact``: the exact CP-SAT model, anytime,
seeded with the greedy schedule), ``exact`` (``hare.exact_milp``: the exact MILP for small
instances).
See docs/formulations/hare.md.
"""
