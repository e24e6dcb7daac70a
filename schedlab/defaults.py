"""Default numbers used across the package, each defined once, with its reason.

Workloads of papers with other values write theirs into the instances they make
(``params.round_s``); formulations, policies and the simulator read the instance, and fall
back on these only where an instance says nothing.
"""

from __future__ import annotations

#: Round length, s: Gavel's (OSDI'20) 6-minute rounds, the length its simulator and policies
#: use.  Shockwave and Titan use 120 s rounds; their workloads write that into their instances.
ROUND_S = 360.0

#: A job is treated unfairly when its finish-time fairness rho exceeds this: Shockwave's
#: threshold (NSDI'23 counts jobs with rho > 1.05 in its "unfair fraction").
UNFAIR_THRESHOLD = 1.05

#: Replay: wall seconds between periodic checkpoints inside a segment (besides the ones at
#: preemption and finish).  Here, not in the executor, so the command line can show it
#: without importing torch.
REPLAY_CHECKPOINT_EVERY_S = 10.0

#: The throughput tables shipped in ``schedlab/data`` by name: the path parts of each file
#: (:func:`schedlab.workloads.throughputs.load_throughputs`).  Here, not there, so the command
#: line can list the names without importing the workload generators.
SHIPPED_THROUGHPUTS: dict[str, tuple[str, ...]] = {
    "gavel": ("gavel_throughputs.json",),
    "shockwave-tacc": ("shockwave", "tacc_throughputs.json"),
}

#: Cluster-trace formats ``simulate --trace-format`` reads
#: (:mod:`schedlab.workloads.traces`); here so the command line need not import the readers.
TRACE_FORMATS: tuple[str, ...] = ("philly", "helios", "pai", "shockwave")
