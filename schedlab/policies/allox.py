"""AlloX (Le et al., EuroSys'20): min total completion time by min-cost bipartite matching.

On one machine that runs jobs one after another, the job run p-th from the end delays itself
and the p - 1 jobs after it, so the total completion time is sum over jobs of p x P (P its
processing time).  With machines of several types, minimizing the total completion time is the
min-cost matching of jobs j to (machine, position p) pairs with cost

    c[j, (k, i, p)] = p * P[j,k],      P[j,k] = R_j / T[j,k]  (s; inf if j cannot run on k)

(Bruno, Coffman and Sethi's classic reduction).  The job matched to the largest position of a
machine is the one that runs first, so it starts now.

Round-based model (simplifications, as in Gavel's AlloX policy):

* machines are the *free* GPUs of each type (one slot per GPU), and jobs are non-preemptive: a
  job that ran last round keeps its gang on its type until it finishes;
* slots of one type are identical, and an optimal matching spreads the n_k jobs that can run on
  type k evenly over its m_k slots, so positions 1..ceil(n_k / m_k) per slot suffice (moving the
  first job of a machine with two more jobs than another to the end of the other's queue
  lowers its multiplier);
* only 1-GPU jobs are matched exactly.  Multi-GPU gangs (outside AlloX's model) are placed
  first, shortest processing time first (what the matching does on identical machines), each
  on its fastest type with ``scale_factor`` free GPUs;
* the fairness knob ``alpha``: only the oldest max(free slots, floor(alpha n)) of the n waiting
  1-GPU jobs enter the matching (alpha = 1: all).

The matching is solved with :func:`scipy.optimize.linear_sum_assignment`.

``mechanism="gavel"`` runs AlloX as Gavel's and Shockwave's code do instead: an allocation
recomputed at the allocation resets of Gavel's round mechanism and realised by its priorities
(:mod:`schedlab.policies.allox_gavel`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.optimize import linear_sum_assignment

from schedlab.errors import InputError
from schedlab.formulations.gavel.rounds import GAVEL_RESET_INTERVAL_S, GavelRoundState
from schedlab.policies.allox_gavel import allox_allocation
from schedlab.policies.base import Policy
from schedlab.policies.fifo import (
    FreeGpus,
    best_throughput,
    keep_running,
    place_in_order,
    type_preference,
)
from schedlab.policies.state import Assignment, ClusterState, JobState

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Match:
    """Job row ``job`` runs on slot ``slot`` of type column ``type``, ``position``-th from last."""

    job: int
    type: int
    slot: int
    position: int


def min_completion_matching(
    processing_s: np.ndarray, slots: Sequence[int]
) -> tuple[list[Match], float]:
    """Min total completion time assignment of jobs to the slots of several machine types.

    ``processing_s[j, k]`` is P[j,k] (s, inf when j cannot run on type k); ``slots[k]`` the
    number of identical slots of type k.  Returns the matches (jobs that can run on no slot are
    left out) and the optimal cost sum p * P[j,k].
    """
    proc = np.asarray(processing_s, dtype=float)
    n_types = proc.shape[1]
    if len(slots) != n_types:
        raise ValueError(f"{n_types} types in processing_s but {len(slots)} slot counts")
    feasible = np.isfinite(proc) & (np.asarray(slots) > 0)[None, :]
    rows = np.flatnonzero(feasible.any(axis=1))
    if rows.size == 0:
        return [], 0.0
    columns: list[tuple[int, int, int]] = []  # (type, slot, position)
    for k, m_k in enumerate(slots):
        n_k = int(feasible[rows, k].sum())
        if m_k <= 0 or n_k == 0:
            continue
        depth = math.ceil(n_k / m_k)
        columns += [(k, i, p) for p in range(1, depth + 1) for i in range(m_k)]
    col_type = np.array([c[0] for c in columns])
    col_position = np.array([c[2] for c in columns], dtype=float)
    cost = proc[np.ix_(rows, col_type)] * col_position[None, :]
    cost[~feasible[np.ix_(rows, col_type)]] = np.inf
    row_idx, col_idx = linear_sum_assignment(cost)
    matches = [
        Match(int(rows[r]), columns[c][0], columns[c][1], columns[c][2])
        for r, c in zip(row_idx, col_idx, strict=True)
    ]
    return matches, float(cost[row_idx, col_idx].sum())


def first_to_run(matches: Sequence[Match]) -> list[Match]:
    """The match with the largest position on each (type, slot): the job that starts now."""
    first: dict[tuple[int, int], Match] = {}
    for m in matches:
        key = (m.type, m.slot)
        if key not in first or m.position > first[key].position:
            first[key] = m
    return list(first.values())


class AlloX(Policy):
    """AlloX: non-preemptive, min total completion time matching of waiting jobs to free GPUs.

    Parameters: ``alpha`` in (0, 1], the fraction of the oldest waiting 1-GPU jobs that enter
    the matching (at least as many as there are free slots; default 1).  AlloX knows
    throughputs: the processing time on each type is R_j / T[j,k].  ``mechanism``:
    ``"schedlab"`` (default, the rules above) or ``"gavel"`` (AlloX as an allocation of
    Gavel's round mechanism, :mod:`schedlab.policies.allox_gavel`; the simulator then also
    follows Gavel's step accounting), with that mechanism's ``reset_interval_s`` and
    ``reset_on_throughput_change`` (see :class:`~schedlab.policies.gavel.GavelPolicy`).
    """

    name = "allox"
    description = "AlloX: min total completion time matching of jobs to (GPU, position)"

    def __init__(self, *, alpha: float = 1.0,
                 mechanism: Literal["schedlab", "gavel"] = "schedlab",
                 reset_interval_s: float = GAVEL_RESET_INTERVAL_S,
                 reset_on_throughput_change: bool = True) -> None:
        super().__init__()
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        if mechanism not in ("schedlab", "gavel"):
            raise InputError(f"mechanism must be 'schedlab' or 'gavel', got {mechanism!r}",
                             field="mechanism")
        if not (math.isfinite(reset_interval_s) and reset_interval_s >= 0):
            raise InputError(f"must be a number of seconds >= 0, got {reset_interval_s!r}",
                             field="reset_interval_s")
        self.alpha = alpha
        self.mechanism: Literal["schedlab", "gavel"] = mechanism
        self.reset_interval_s = float(reset_interval_s)
        self.reset_on_throughput_change = bool(reset_on_throughput_change)
        self._rounds: GavelRoundState | None = None
        self._previous: dict[str, dict[str, float]] = {}

    def reset(self) -> None:
        """Forget the previous run: counters, the round mechanism and the last allocation."""
        super().reset()
        self._rounds = None
        self._previous = {}

    def _decide_gavel(self, state: ClusterState) -> list[Assignment]:
        """One round of Gavel's mechanism over AlloX's allocation (recomputed at resets)."""
        types = state.cluster.types
        gpus = {k: state.cluster.accelerators[k].count for k in types}
        if self._rounds is None:
            self._rounds = GavelRoundState(
                types, [gpus[k] for k in types], state.round_s, seed=state.seed,
                reset_interval_s=self.reset_interval_s,
                reset_on_throughput_change=self.reset_on_throughput_change)
        rounds = self._rounds
        if rounds.observe(state.now, state.active):
            t0 = time.perf_counter()
            allocation = allox_allocation(state.active, types, gpus, state.now, self._previous,
                                          self.alpha)
            self.solver_time_s += time.perf_counter() - t0
            self.solves += 1
            self._previous = allocation
            rounds.reset(state.now, {job_id: [row[k] for k in types]
                                     for job_id, row in allocation.items()})
        return [Assignment(job_id, k) for job_id, k in rounds.play(state.now, state.active)]

    def decide(self, state: ClusterState) -> list[Assignment]:
        """Keep running jobs; place gangs SPT; match 1-GPU jobs to free GPUs."""
        self.decisions += 1
        if self.mechanism == "gavel":
            return self._decide_gavel(state)
        types = state.cluster.types
        free = FreeGpus(state)
        out, waiting = keep_running(state, free)

        def spt(job: JobState) -> tuple[float, float, str]:
            best = best_throughput(job, types)
            return (job.remaining_steps / best if best > 0 else math.inf, job.arrival, job.id)

        def fastest(job: JobState) -> list[str]:
            return type_preference(job, state, heterogeneity_aware=True)

        gangs = sorted((j for j in waiting if j.scale_factor > 1), key=spt)
        out += place_in_order(gangs, free, fastest)

        singles = [j for j in waiting if j.scale_factor == 1]
        slots = [free.free[k] for k in types]
        n_considered = min(len(singles), max(sum(slots), int(self.alpha * len(singles))))
        singles = singles[:n_considered]  # oldest first
        if not singles or sum(slots) == 0:
            return out
        proc = np.array([
            [j.remaining_steps / j.throughput[k] if j.throughput.get(k, 0.0) > 0 else math.inf
             for k in types]
            for j in singles
        ])
        t0 = time.perf_counter()
        matches, cost = min_completion_matching(proc, slots)
        self.solver_time_s += time.perf_counter() - t0
        self.solves += 1
        logger.debug("allox: matched %d jobs to %d free GPUs, cost %.1f s", len(matches),
                     sum(slots), cost)
        for m in first_to_run(matches):
            k = types[m.type]
            free.take(1, k)
            out.append(Assignment(singles[m.job].id, k))
        return out
