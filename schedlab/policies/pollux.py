"""``pollux``: Pollux's scheduler (OSDI'21) as its artifact's simulator runs it, on goodput
jobs (docs/goodput.md, "pollux").

Each round (petuum/adaptdl ``osdi21-artifact`` at c793c70, ``simulator/pollux.py``
115-200): order the active jobs least attained service first (ties: submission, then
workload order); build each job's speedup over its fair share of the cluster from its
fitted goodput model (a job not yet run: r / fair replicas); search per-node replica
counts with NSGA-II (:func:`~schedlab.formulations.pollux.search.pollux_search`, 100 x 100,
seeded with last round's front); give each job its chosen replicas, node by node in node
order.  One GPU type only, as Pollux's simulator has.

Options (the authors' behaviour is the default): ``seed`` (the search's randomness; the
authors' runs are unseeded), ``match_previous_by_key`` (carry last round's front to each
job's own row, where the code pairs rows by position), ``realistic_fair_nodes`` (the fair
share on the nodes it needs rather than on one node), ``age_floor_s`` (a job's age in the
restart factor is at least this, so a job seen at age 0 is not kept off the cluster for a
round; 0 as the code), ``pop_size`` and ``generations``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from schedlab.errors import InputError
from schedlab.formulations.pollux import (
    JobGoodput,
    fair_share_speedups,
)
from schedlab.formulations.pollux.nsga2 import GENERATIONS, POP_SIZE
from schedlab.formulations.pollux.search import (
    PolluxJob,
    carry_front,
    pollux_job_order,
    pollux_search,
)
from schedlab.policies.goodput_state import Decision, GoodputState


class Pollux:
    """Pollux's allocation search (module docstring)."""

    name = "pollux"

    def __init__(self, *, seed: int = 0, match_previous_by_key: bool = False,
                 realistic_fair_nodes: bool = False, pop_size: int = POP_SIZE,
                 generations: int = GENERATIONS, restart_delay_s: float = 30.0,
                 age_floor_s: float = 0.0) -> None:
        self.rng = np.random.default_rng(seed)
        self.match_previous_by_key = match_previous_by_key
        self.realistic_fair_nodes = realistic_fair_nodes
        self.pop_size = pop_size
        self.generations = generations
        self.restart_delay_s = restart_delay_s
        self.age_floor_s = age_floor_s
        self._front: Any = None
        self._jobs: list[str] = []
        self._nodes: list[int] = []
        self._search_s = 0.0
        self._searches = 0

    def counters(self) -> tuple[float, int]:
        """Seconds spent searching and searches run."""
        return self._search_s, self._searches

    def decide(self, state: GoodputState) -> Decision:
        """The round's allocation (module docstring)."""
        if len(state.types) != 1:
            raise InputError("pollux runs on one GPU type (its simulator's cluster); this "
                             f"cluster has {', '.join(state.types)}", field="cluster")
        gpu_type = state.types[0]
        order = pollux_job_order([j.attained_service for j in state.jobs],
                                 [j.submission_time for j in state.jobs])
        jobs = [state.jobs[i] for i in order]
        names = [j.name for j in jobs]
        nodes = list(range(state.nodes[gpu_type]))
        capacities = [state.gpus_per_node[gpu_type]] * len(nodes)
        goodputs = [None if j.models.get(gpu_type) is None else JobGoodput(
            model=j.models[gpu_type], max_batch_size=j.max_batch_size[gpu_type],
            atomic_bsz_range=j.atomic_bsz_range[gpu_type]) for j in jobs]
        speedups = fair_share_speedups(goodputs, capacities,
                                       realistic_nodes=self.realistic_fair_nodes)
        base = np.zeros((len(jobs), len(nodes)), dtype=np.int64)
        for row, job in enumerate(jobs):
            if job.allocation is not None and job.allocation[0] == gpu_type:
                for node in job.allocation[1]:
                    base[row, node] += 1
        previous = None
        if self._front is not None:
            previous = carry_front(self._front, self._jobs, names, self._nodes, nodes,
                                   match_jobs_by_key=self.match_previous_by_key)
        search_jobs = [PolluxJob(speedup=s, age_s=j.age, num_restarts=j.num_restarts,
                                 max_replicas=j.max_replicas[gpu_type])
                       for s, j in zip(speedups, jobs, strict=True)]
        tic = time.perf_counter()
        outcome = pollux_search(search_jobs, capacities, base, self.rng,
                                previous_front=previous, pop_size=self.pop_size,
                                generations=self.generations,
                                restart_delay_s=self.restart_delay_s,
                                age_floor_s=self.age_floor_s)
        self._search_s += time.perf_counter() - tic
        self._searches += 1
        self._front, self._jobs, self._nodes = outcome.front, names, nodes
        decision: Decision = {}
        for row, name in enumerate(names):
            ids = tuple(node for node in nodes for _ in range(int(outcome.state[row, node])))
            if ids:
                decision[name] = (gpu_type, ids)
        return decision
