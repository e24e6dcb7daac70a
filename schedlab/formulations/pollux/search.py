"""One round of Pollux's allocation search (OSDI'21): NSGA-II over per-node replica counts.

Written from the authors' code (petuum/adaptdl, branch ``osdi21-artifact`` at c793c70,
``simulator/pollux.py``: ``optimize`` 115-200, ``_adapt_prev_states`` 60-86; inputs from
``simulator/simulator.py:321-336``).  Per round:

1. order the jobs least attained service first, ties by creation time
   (:func:`pollux_job_order`, ``PX/pollux.py:147-150``; no job is pinned in the simulator);
2. start NSGA-II (:mod:`.nsga2`, pop 100, 100 generations) from the previous round's
   non-dominated front carried to this round's jobs and nodes (:func:`carry_front`), or
   from the current allocation alone in the first round (``:159-162``);
3. minimise F = [-FITNESS, -UTILITY] (:mod:`.fitness`) under the operators of
   :mod:`.operators`;
4. take the final population's rank-0 front, choose its state of largest FITNESS (the
   first on ties, ``:180-188``) and keep the whole front for the next round (``:176``).

The node columns are the nodes in the caller's order (the authors sort by key, ``:151-152``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from schedlab.formulations.pollux.fitness import (
    POWER,
    RESTART_DELAY_S,
    PolluxObjectives,
    SpeedupFunction,
)
from schedlab.formulations.pollux.nsga2 import GENERATIONS, POP_SIZE, NSGA2Result, nsga2
from schedlab.formulations.pollux.operators import MAX_NODES_PER_JOB, crossover, mutate, repair

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PolluxJob:
    """What the search knows of a job (``PX/simulator.py:321-336``): its ``speedup``
    function over (nodes, replicas) relative to its fair share
    (:func:`~schedlab.formulations.pollux.fitness.fair_share_speedups`), its ``age_s``
    (s since submission), ``num_restarts`` so far (0 before the first start), and the
    replica limits (GPUs): ``max_replicas`` (the simulator's min(max(2 x the largest GPU
    count ever profiled, 1), 64, max batch / min atomic batch), 1 for NCF) and
    ``min_replicas`` (0)."""

    speedup: SpeedupFunction
    age_s: float
    num_restarts: int
    max_replicas: int
    min_replicas: int = 0


def pollux_job_order(attained_service: npt.ArrayLike,
                     creation_timestamps: npt.ArrayLike) -> IntArray:
    """The indices of the jobs in Pollux's order: attained service (GPU-seconds) ascending,
    then creation time ascending, then input order (a stable sort, like Python's
    ``sorted``)."""
    return np.lexsort((np.asarray(creation_timestamps), np.asarray(attained_service)))


def carry_front(front: npt.ArrayLike, previous_jobs: Sequence[Hashable],
                jobs: Sequence[Hashable], previous_nodes: Sequence[Hashable],
                nodes: Sequence[Hashable], *, match_jobs_by_key: bool = False) -> IntArray:
    """The previous round's front (F, J', N') as initial states (F, J, N) of this round:
    rows of jobs still present, zero rows for new jobs, columns matched by node key, zero
    columns for new nodes (``PX/pollux.py:60-86``, without the autoscaler's placeholder
    nodes).

    By default it does what the authors' code does: the jobs present in both rounds are
    paired **by position** -- the k-th of them in the previous order gets the k-th of them
    in the new order -- which gives a job another job's row whenever their relative order
    changed (it changes as attained service grows).  ``match_jobs_by_key=True`` (off by
    default) pairs each job with its own row instead.
    """
    previous = np.asarray(front, dtype=np.int64)
    states = np.zeros((len(previous), len(jobs), len(nodes)), dtype=np.int64)
    previous_set, current_set = set(previous_jobs), set(jobs)
    destination = [i for i, key in enumerate(jobs) if key in previous_set]
    if match_jobs_by_key:
        previous_index = {key: i for i, key in enumerate(previous_jobs)}
        source = [previous_index[jobs[i]] for i in destination]
    else:
        source = [i for i, key in enumerate(previous_jobs) if key in current_set]
    node_index = {key: i for i, key in enumerate(previous_nodes)}
    for column, key in enumerate(nodes):
        if key in node_index:
            states[:, destination, column] = previous[:, source, node_index[key]]
    return states


class PolluxProblem:
    """The objectives and operators of one round, for :func:`~.nsga2.nsga2`."""

    def __init__(self, objectives: PolluxObjectives, max_replicas: IntArray,
                 min_replicas: IntArray, max_nodes_per_job: int = MAX_NODES_PER_JOB):
        self.objectives = objectives
        self.max_replicas = max_replicas
        self.min_replicas = min_replicas
        self.max_nodes_per_job = max_nodes_per_job
        self._state_shape = objectives.base_state.shape

    def evaluate(self, population: IntArray) -> FloatArray:
        """F = [-FITNESS, -UTILITY]."""
        return self.objectives(population)

    def crossover(self, first: IntArray, second: IntArray,
                  rng: np.random.Generator) -> tuple[IntArray, IntArray]:
        """Single cut over job rows."""
        return crossover(first, second, rng)

    def mutate(self, population: IntArray, rng: np.random.Generator) -> IntArray:
        """Reset, zero, grow."""
        objectives = self.objectives
        return mutate(population, objectives.base_state, objectives.node_capacities, rng)

    def repair(self, population: IntArray, rng: np.random.Generator) -> IntArray:
        """Interference, max_replicas, 16 nodes, node capacity, min_replicas."""
        return repair(population, self.max_replicas, self.objectives.node_capacities, rng,
                      min_replicas=self.min_replicas, max_nodes_per_job=self.max_nodes_per_job)


@dataclass(frozen=True)
class PolluxRound:
    """A round's outcome: the chosen ``state`` (J, N) and its ``fitness`` and ``utility``;
    the non-dominated ``front`` (F, J, N) to carry into the next round and its objectives
    ``front_F`` (F, 2, minimised: -fitness, -utility); the search's full ``result``."""

    state: IntArray
    fitness: float
    utility: float
    front: IntArray
    front_F: FloatArray
    result: NSGA2Result | None


def pollux_search(jobs: Sequence[PolluxJob], node_capacities: npt.ArrayLike,
                  base_state: npt.ArrayLike, rng: np.random.Generator, *,
                  previous_front: npt.ArrayLike | None = None, pop_size: int = POP_SIZE,
                  generations: int = GENERATIONS, power: float = POWER,
                  restart_delay_s: float = RESTART_DELAY_S, age_floor_s: float = 0.0,
                  max_nodes_per_job: int = MAX_NODES_PER_JOB) -> PolluxRound:
    """One Pollux round (module docstring).

    ``jobs``: in Pollux's job order (:func:`pollux_job_order`); ``node_capacities``: GPUs
    per node (N,); ``base_state``: the current allocation, (J, N) replicas;
    ``previous_front``: last round's front carried to these jobs and nodes
    (:func:`carry_front`), (F, J, N), or None in the first round; ``rng``: all the search's
    randomness.  ``power`` (p), ``restart_delay_s`` (delta, s): the objective's constants;
    ``age_floor_s``: off (0) as in the authors' code, see
    :func:`~schedlab.formulations.pollux.fitness.restart_factor`.
    """
    capacities = np.asarray(node_capacities, dtype=np.int64)
    base = np.asarray(base_state, dtype=np.int64).reshape(len(jobs), len(capacities))
    if len(jobs) == 0:
        empty = np.zeros((1, 0, len(capacities)), dtype=np.int64)
        return PolluxRound(base, 0.0, 0.0, empty, np.zeros((1, 2)), None)
    if np.any(capacities < 1):
        raise ValueError("every node needs at least one GPU")
    objectives = PolluxObjectives([job.speedup for job in jobs], base, capacities,
                                  [job.age_s for job in jobs],
                                  [job.num_restarts for job in jobs], power=power,
                                  restart_delay_s=restart_delay_s, age_floor_s=age_floor_s)
    problem = PolluxProblem(objectives,
                            np.array([job.max_replicas for job in jobs], dtype=np.int64),
                            np.array([job.min_replicas for job in jobs], dtype=np.int64),
                            max_nodes_per_job)
    if previous_front is None or len(np.asarray(previous_front)) == 0:
        initial = base[None]
    else:
        initial = np.asarray(previous_front, dtype=np.int64)
        if initial.shape[1:] != base.shape:
            raise ValueError(f"previous front has states of shape {initial.shape[1:]}; "
                             f"expected {base.shape} (carry it with carry_front)")
    result = nsga2(initial, problem, rng, pop_size=pop_size, generations=generations)
    front, front_F = result.population[result.front], result.F[result.front]
    best = int(np.argmin(front_F[:, 0]))
    return PolluxRound(front[best], float(-front_F[best, 0]), float(-front_F[best, 1]),
                       front, front_F, result)


__all__ = ["PolluxJob", "PolluxProblem", "PolluxRound", "carry_front", "pollux_job_order",
           "pollux_search"]
