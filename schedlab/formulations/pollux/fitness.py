r"""Pollux's objectives (OSDI'21): the restart-penalised, fair-share-normalised power mean of
the jobs' speedups, and the cluster utility, for a whole population of allocation states.

Written from the authors' code (petuum/adaptdl, branch ``osdi21-artifact`` at c793c70,
``simulator/pollux.py``: fair share 242-256, ``get_cluster_utilities`` 266-299,
``_get_job_speedups`` 301-308, ``_evaluate`` 315-337; ``simulator/speedup.py`` 18-70).

A *state* X is a J x N integer matrix: X[j, n] replicas (one GPU each) of job j on node n.
With G GPUs on N nodes, J jobs and the current allocation X0 (the *base state*):

* K_j = sum_n X[j, n] replicas, N_j = #{n : X[j, n] > 0} nodes used;
* SPEEDUP_j = speedup_j(N_j, K_j), 0 when K_j = 0 (the goodput over the fair-share goodput,
  :func:`fair_share_speedups`);
* scaled_j = SPEEDUP_j * N / G (the dominant share 1/G of one replica times N: a node's worth
  of GPUs at fair-share goodput scores 1);
* REALLOC_j = max(age_j - restarts_j * delta, 0) / (age_j + delta), delta = 30 s; scaled_j is
  multiplied by it only when row j of X differs from row j of X0 (any node count, a first
  start included);
* FITNESS = ((1/J) sum_j (scaled_j + 1e-3)^p)^(1/p) with p = -1 (a harmonic mean: a job
  without GPUs costs 1/1e-3 = 1000 in the sum); p = 0 is the geometric mean
  exp((1/J) sum_j log max(scaled_j, 1e-3)) (no +1e-3 there);
* UTILITY = sum_j (SPEEDUP_j / K_j) (K_j / G_active), G_active = GPUs of the nodes that hold
  any replica (0 when there is none): the second objective of the search.

The search minimises F = [-FITNESS, -UTILITY].  Speedups are looked up in a
:class:`SpeedupTable` that calls each job's function once per (nodes, replicas) pair in a
round.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from schedlab.world.goodput import GoodputModel

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: A job's speedup as a function of (nodes used, replicas), both ints, K >= N >= 1.
SpeedupFunction = Callable[[int, int], float]

#: The restart delay the objective charges, s (``PX/pollux.py:324``).
RESTART_DELAY_S = 30.0
#: The power-mean exponent (``PX/pollux.py:328``): more negative is more fair.
POWER = -1.0
#: Added to each scaled speedup before the power mean (``PX/pollux.py:334``).
SPEEDUP_FLOOR = 1e-3


@dataclass(frozen=True)
class FairShare:
    """The fair-share placement a job's speedup is measured against: ``replicas`` =
    ceil(G / J) GPUs on ``nodes`` nodes (``PX/pollux.py:243-247``)."""

    nodes: int
    replicas: int


def fair_share(node_capacities: Sequence[int], num_jobs: int, *,
               realistic_nodes: bool = False) -> FairShare:
    """Pollux's fair share: ceil(G / J) replicas (GPUs) on ceil(N / G) nodes, which is 1 node
    whenever N <= G, even when ceil(G / J) GPUs cannot fit on one node (the authors' quirk,
    ``PX/pollux.py:246-247``).

    ``realistic_nodes=True`` (not in the authors' code, off by default) uses instead the
    fewest nodes, largest first, whose GPUs hold the fair-share replicas."""
    capacities = [int(c) for c in node_capacities]
    gpus = sum(capacities)
    if num_jobs < 1 or gpus < 1:
        raise ValueError(f"need at least one job and one GPU, got {num_jobs} jobs, {gpus} GPUs")
    # The authors' float expression, ceil(1 / (1 / G) / J): it exceeds ceil(G / J) by one
    # for a few G (49, 98, 196, ...) where 1 / (1 / G) rounds above G.
    share = 1.0 / gpus
    replicas = math.ceil(1.0 / share / num_jobs)
    if not realistic_nodes:
        return FairShare(nodes=math.ceil(len(capacities) * share), replicas=replicas)
    cumulative = np.cumsum(sorted(capacities, reverse=True))
    return FairShare(nodes=int(np.searchsorted(cumulative, replicas)) + 1, replicas=replicas)


@dataclass(frozen=True)
class JobGoodput:
    """What a job's speedup function is built from (``PX/simulator.py:56-62``): its fitted
    goodput ``model``, the largest total batch ``max_batch_size`` (samples) and the per-GPU
    batch range ``atomic_bsz_range`` (samples); the batch and accumulation are re-optimised
    for every placement (accumulation on)."""

    model: GoodputModel
    max_batch_size: float
    atomic_bsz_range: tuple[int, int]


def goodput_speedup(job: JobGoodput, share: FairShare) -> SpeedupFunction:
    """speedup(N, K) = goodput_opt(N, K) / goodput_opt(share.nodes, share.replicas), the
    optimum over batch sizes of :meth:`GoodputModel.optimize` (samples/s over samples/s);
    0 for K = 0 (``PX/speedup.py:30-31``, base replaced at ``PX/pollux.py:252-256``)."""
    base = job.model.optimize(share.nodes, share.replicas, job.max_batch_size,
                              job.atomic_bsz_range).goodput
    if not base > 0:
        raise ValueError(
            f"the fair-share goodput on {share.replicas} GPUs is {base}: no atomic batch in "
            f"{job.atomic_bsz_range} gives a total batch <= {job.max_batch_size}; lower the "
            "GPU count or raise the maximum batch size")

    def speedup(nodes: int, replicas: int) -> float:
        if replicas == 0:
            return 0.0
        return job.model.optimize(nodes, replicas, job.max_batch_size,
                                  job.atomic_bsz_range).goodput / base

    return speedup


def linear_speedup(share: FairShare) -> SpeedupFunction:
    """speedup(N, K) = K / share.replicas: a job without a fitted model
    (``PX/simulator.py:57-58`` gives ``lambda n, r: r``, rescaled at ``PX/pollux.py:249-250``)."""
    replicas = share.replicas
    return lambda nodes, count: count / replicas


def fair_share_speedups(jobs: Sequence[JobGoodput | None], node_capacities: Sequence[int], *,
                        realistic_nodes: bool = False) -> list[SpeedupFunction]:
    """Every job's speedup over its fair share of this round (:func:`fair_share` with J =
    ``len(jobs)``): :func:`goodput_speedup` for a job with a model, :func:`linear_speedup`
    for a job without one (``None``)."""
    share = fair_share(node_capacities, len(jobs), realistic_nodes=realistic_nodes)
    return [linear_speedup(share) if job is None else goodput_speedup(job, share)
            for job in jobs]


class SpeedupTable:
    """Every job's speedup over (nodes used 0..N, replicas 0..G), filled on first use: each
    function is called once per distinct (nodes, replicas) pair.  Holds J (N + 1) (G + 1)
    floats (350 kB for 40 jobs on 16 nodes x 4 GPUs)."""

    def __init__(self, speedups: Sequence[SpeedupFunction], num_nodes: int, num_gpus: int):
        self._speedups = list(speedups)
        self._table = np.full((len(self._speedups), num_nodes + 1, num_gpus + 1), np.nan)
        self._table[:, 0, 0] = 0.0
        self.calls = 0

    def lookup(self, nodes_used: IntArray, replicas: IntArray) -> FloatArray:
        """speedup_j(nodes_used[..., j], replicas[..., j]) for arrays shaped (..., J)."""
        _, max_nodes, max_replicas = self._table.shape
        if (np.any(nodes_used >= max_nodes) or np.any(replicas >= max_replicas)
                or np.any(nodes_used > replicas) or np.any((nodes_used == 0) != (replicas == 0))
                or np.any(nodes_used < 0)):
            raise ValueError("a state uses more nodes or GPUs than the cluster has, or more "
                             "nodes than replicas")
        jobs = np.broadcast_to(np.arange(self._table.shape[0]), nodes_used.shape)
        values = self._table[jobs, nodes_used, replicas]
        missing = np.isnan(values)
        if missing.any():
            keys = np.unique(np.stack([jobs[missing], nodes_used[missing], replicas[missing]]),
                             axis=1)
            for job, nodes, count in keys.T:
                value = float(self._speedups[job](int(nodes), int(count)))
                if not value >= 0:
                    raise ValueError(f"job {job}'s speedup on {nodes} nodes, {count} GPUs is "
                                     f"{value}; speedups must be >= 0")
                self._table[job, nodes, count] = value
                self.calls += 1
            values = self._table[jobs, nodes_used, replicas]
        return values


def restart_factor(ages_s: npt.ArrayLike, num_restarts: npt.ArrayLike,
                   delay_s: float = RESTART_DELAY_S, *, age_floor_s: float = 0.0) -> FloatArray:
    """REALLOC_j = max(age_j - restarts_j delay, 0) / (age_j + delay), unitless, ages and delay
    in s (``PX/pollux.py:322-325``).  A job seen at age 0 gets 0: no reason to start it that
    round (the authors' behaviour).  ``age_floor_s`` > 0 (not in the authors' code, off by
    default) raises every age to at least that many seconds first."""
    ages = np.maximum(np.asarray(ages_s, dtype=float), age_floor_s)
    restarts = np.asarray(num_restarts, dtype=float)
    if np.any(ages < 0) or np.any(restarts < 0) or delay_s < 0 or np.any(ages + delay_s <= 0):
        raise ValueError("ages, restarts and the delay must be >= 0, and age + delay > 0")
    return np.maximum(ages - restarts * delay_s, 0.0) / (ages + delay_s)


class PolluxObjectives:
    """FITNESS and UTILITY (module docstring) of states shaped (P, J, N) in job order.

    ``speedups``: one function per job; ``base_state``: X0, (J, N) replicas;
    ``node_capacities``: GPUs per node; ``ages_s``, ``num_restarts``: per job;
    ``power``: p; ``restart_delay_s``: delta; ``age_floor_s``: see :func:`restart_factor`.
    """

    def __init__(self, speedups: Sequence[SpeedupFunction], base_state: npt.ArrayLike,
                 node_capacities: npt.ArrayLike, ages_s: npt.ArrayLike,
                 num_restarts: npt.ArrayLike, *, power: float = POWER,
                 restart_delay_s: float = RESTART_DELAY_S, age_floor_s: float = 0.0):
        self.base_state: IntArray = np.asarray(base_state, dtype=np.int64)
        self.node_capacities: IntArray = np.asarray(node_capacities, dtype=np.int64)
        num_jobs = len(speedups)
        num_nodes = len(self.node_capacities)
        if num_jobs < 1 or self.base_state.shape != (num_jobs, num_nodes):
            raise ValueError(f"base state has shape {self.base_state.shape}; expected "
                             f"({num_jobs} jobs, {num_nodes} nodes), at least one job")
        self.num_gpus = int(self.node_capacities.sum())
        if self.num_gpus < 1 or np.any(self.node_capacities < 0):
            raise ValueError("the nodes need at least one GPU in all, and none fewer than 0")
        self.table = SpeedupTable(speedups, num_nodes, self.num_gpus)
        self.restart = restart_factor(ages_s, num_restarts, restart_delay_s,
                                      age_floor_s=age_floor_s)
        if self.restart.shape != (num_jobs,):
            raise ValueError(f"need one age and one restart count per job ({num_jobs})")
        self.power = power
        #: N / G: the dominant share 1 / G of a one-GPU replica times N (PX/pollux.py:320).
        self.scale = num_nodes / self.num_gpus

    def speedups(self, states: IntArray) -> FloatArray:
        """SPEEDUP_j of every state, (P, J)."""
        return self.table.lookup(np.count_nonzero(states, axis=2), states.sum(axis=2))

    def fitness(self, states: IntArray, speedups: FloatArray | None = None) -> FloatArray:
        """FITNESS of every state, (P,) (``PX/pollux.py:315-335``)."""
        if speedups is None:
            speedups = self.speedups(states)
        scaled = speedups * self.scale
        changed = np.any(states != self.base_state, axis=2)
        scaled = scaled * np.where(changed, self.restart, 1.0)
        num_jobs = states.shape[1]
        if self.power == 0:
            return np.exp(np.sum(np.log(np.maximum(scaled, SPEEDUP_FLOOR)), axis=1) / num_jobs)
        return (np.sum((scaled + SPEEDUP_FLOOR) ** self.power, axis=1)
                / num_jobs) ** (1.0 / self.power)

    def utility(self, states: IntArray, speedups: FloatArray | None = None) -> FloatArray:
        """UTILITY of every state, (P,) (``PX/pollux.py:280-299``, one resource type)."""
        if speedups is None:
            speedups = self.speedups(states)
        replicas = states.sum(axis=2)
        active_gpus = (states.sum(axis=1) > 0) @ self.node_capacities
        with np.errstate(divide="ignore", invalid="ignore"):
            shares = np.where(replicas > 0, replicas / active_gpus[:, None], 0.0)
            per_replica = np.where(replicas > 0, speedups / replicas, 0.0)
        return np.sum(per_replica * shares, axis=1)

    def __call__(self, states: IntArray) -> FloatArray:
        """F = [-FITNESS, -UTILITY], (P, 2), both minimised."""
        speedups = self.speedups(states)
        return np.column_stack([-self.fitness(states, speedups),
                                -self.utility(states, speedups)])


__all__ = ["POWER", "RESTART_DELAY_S", "SPEEDUP_FLOOR", "FairShare", "JobGoodput",
           "PolluxObjectives", "SpeedupFunction", "SpeedupTable", "fair_share",
           "fair_share_speedups", "goodput_speedup", "linear_speedup", "restart_factor"]
