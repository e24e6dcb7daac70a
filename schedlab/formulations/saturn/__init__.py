"""Saturn (joint parallelism selection, resource allocation and scheduling of multi-job
training).

Modules: ``data`` (options and runtimes), ``models`` (the time-indexed MILP and its
variants), ``bounds`` (lower bounds), ``nodes`` (node-level placement and Benders),
``node_kernel`` (the numba list-scheduling kernel), ``baselines`` (the paper's baselines),
``introspective`` (re-planning during execution), with its parts ``execution`` (a plan run on
whole nodes in continuous time: the simulator's node-level mode, re-exported as
``schedlab.simulator.nodes``), ``introspection_policy`` (the re-planning decision) and
``replan`` (the re-planning MILP).
"""
