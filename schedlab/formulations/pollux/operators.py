"""Pollux's genetic operators on allocation states: crossover, mutation and repair.

Written from the authors' code (petuum/adaptdl, branch ``osdi21-artifact`` at c793c70,
``simulator/pollux.py``: ``_crossover`` 339-352, ``_mutation`` 354-374, ``_repair`` 376-420),
vectorised over the population like theirs.  States are (P, J, N) integer arrays: P states,
X[p, j, n] replicas (one GPU each) of job j on node n.

**Job order matters** (repair keeps the earlier job where two compete): the rows must be in
Pollux's order, least attained service first, ties by creation time (``PX/pollux.py:147-150``;
:func:`schedlab.formulations.pollux.search.pollux_job_order`).  The caller passes the rows
so ordered.

Randomness comes from the ``numpy.random.Generator`` passed in (the authors use numpy's
global generator, unseeded); the draws follow the same distributions, not the same stream.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

#: Probability that mutation resets a job row to the base state (``PX/pollux.py:357``).
RESET_PROBABILITY = 0.1
#: Probability that mutation selects a job row for zeroing (``PX/pollux.py:360``) ...
ZERO_ROW_PROBABILITY = 0.1
#: ... and that it then zeroes each element of that row (``PX/pollux.py:360-361``).
ZERO_ELEMENT_PROBABILITY = 0.1
#: At most this many nodes per job (``PX/pollux.py:398``).
MAX_NODES_PER_JOB = 16


def crossover(first: IntArray, second: IntArray,
              rng: np.random.Generator) -> tuple[IntArray, IntArray]:
    """Single-point crossover over job rows (``PX/pollux.py:339-344``): for each mating m a
    cut c_m uniform in [0, J); the children swap the parents' rows j < c_m (c_m = 0 swaps
    nothing).  ``first``, ``second``: the parents, (M, J, N).  The authors' node-count mask
    that follows (``:345-351``) keeps every node when the cluster size is fixed, so it is
    left out."""
    num_matings, num_jobs = first.shape[:2]
    cut = rng.integers(num_jobs, size=(num_matings,))
    swap = (np.arange(num_jobs) < cut[:, None])[:, :, None]
    return np.where(swap, second, first), np.where(swap, first, second)


def mutate(states: IntArray, base_state: IntArray, node_capacities: IntArray,
           rng: np.random.Generator) -> IntArray:
    """The authors' three mutation steps (``PX/pollux.py:354-374``), on a copy:

    1. each job row is reset to its base-state row X0[j] with probability 0.1;
    2. each job row is selected with probability 0.1, and each element of a selected row
       is set to 0 with probability 0.1;
    3. with free[n] = capacity[n] - sum_j X[j, n] GPUs after steps 1-2, mask1[j, n] = a
       replica fits on node n (free[n] >= 1; the same for every job), mask2[j, n] =
       mask1[j, n] and X[j, n] > 0, p1 = mask1 / max(sum_j mask1[:, n], 1) and
       p2 = mask2 / max(sum_j mask2[:, n], 1) -- both normalised over the **jobs** on a node
       (``axis=1`` of the (P, J, N) mask, ``:368-370``): about one job per node with room
       grows; each element X[j, n] is redrawn with probability p1 + p2 - p1 p2, uniformly
       from X[j, n] to capacity[n] (inclusive).

    The result may exceed a node's capacity or a job's limits; :func:`repair` fixes it.
    """
    shape = states.shape
    states = states.copy()
    reset = rng.random(shape[:2]) < RESET_PROBABILITY
    states[reset] = base_state[np.nonzero(reset)[1]]
    zero_rows = rng.random(shape[:2]) < ZERO_ROW_PROBABILITY
    if zero_rows.any():
        rows = states[zero_rows]
        rows[rng.random(rows.shape) < ZERO_ELEMENT_PROBABILITY] = 0
        states[zero_rows] = rows
    # Step 3 touches only the (state, node) pairs with a free GPU, where mask1 holds for
    # every job (each replica needs one GPU): p1 = 1 / J there, 0 elsewhere.
    free = node_capacities - states.sum(axis=1)
    pairs, nodes = np.nonzero(free >= 1)
    if len(pairs):
        column = states[pairs, :, nodes]
        p1 = 1.0 / shape[1]
        held = column > 0
        p2 = held / np.maximum(held.sum(axis=1, keepdims=True), 1.0)
        grow = rng.random(column.shape) < p1 + p2 - p1 * p2
        # The authors draw randint(X, capacity + 1) for every element and keep the drawn
        # ones; here only the kept ones are drawn, as floor(low + U (capacity + 1 - low)),
        # U uniform in [0, 1).  A state above capacity (only an invalid base state) draws
        # the capacity.
        capacity = np.broadcast_to(node_capacities[nodes][:, None], column.shape)[grow]
        low = np.minimum(column[grow], capacity)
        column[grow] = low + (rng.random(len(low)) * (capacity + 1 - low)).astype(np.int64)
        states[pairs, :, nodes] = column
    return states


def repair(states: IntArray, max_replicas: IntArray, node_capacities: IntArray,
           rng: np.random.Generator, *, min_replicas: IntArray | None = None,
           max_nodes_per_job: int = MAX_NODES_PER_JOB) -> IntArray:
    """Make states feasible, in the authors' order (``PX/pollux.py:376-420``), on a copy:

    1. *interference avoidance* (``:387-390``): a job is distributed if it uses more than one
       node; on each node, counting in job order the distributed jobs that hold replicas
       there, every job row from the second such job on is zeroed on that node.  The first
       distributed job in job order keeps the node; note that a single-node job that comes
       after the second distributed job on the node loses its replicas there too (the
       authors' cumulative mask covers every later row);
    2. *max_replicas* (``:393-397``): the nodes of each job row are shuffled independently
       (uniform permutation), the row's cumulative sum is capped at ``max_replicas[j]`` and
       un-accumulated;
    3. *nodes per job* (``:398-401``): in the same shuffled order, only the first
       ``max_nodes_per_job`` nodes holding replicas are kept; then the shuffle is undone;
    4. *node capacity* (``:404-412``): on each node the cumulative sum over jobs, in job
       order, is capped at the node's GPUs (later jobs lose replicas);
    5. *min_replicas* (``:416-419``): rows with fewer than ``min_replicas[j]`` replicas are
       zeroed (Pollux's simulator passes 0: a no-op).

    ``states``: (P, J, N); ``max_replicas``, ``min_replicas``: (J,); ``node_capacities``:
    (N,) GPUs.
    """
    states = states.copy()
    distributed = np.count_nonzero(states, axis=2) > 1
    on_node = (states > 0) & distributed[:, :, None]
    states[np.cumsum(on_node, axis=1) > 1] = 0
    # Steps 2-3 change only rows over a limit; whatever the shuffle, they leave the others
    # as they are, so only those rows are shuffled.
    limit = np.broadcast_to(np.asarray(max_replicas), states.shape[:2])
    over = ((states.sum(axis=2) > limit)
            | (np.count_nonzero(states, axis=2) > max_nodes_per_job))
    if over.any():
        rows = states[over]
        shuffle = np.argsort(rng.random(rows.shape), axis=1)
        shuffled = np.take_along_axis(rows, shuffle, axis=1)
        capped = np.minimum(np.cumsum(shuffled, axis=1), limit[over][:, None])
        shuffled = np.diff(capped, axis=1, prepend=0)
        nodes_used = np.minimum(np.cumsum(shuffled > 0, axis=1), max_nodes_per_job)
        shuffled[np.diff(nodes_used, axis=1, prepend=0) == 0] = 0
        states[over] = np.take_along_axis(shuffled, np.argsort(shuffle, axis=1), axis=1)
    filled = np.minimum(np.cumsum(states, axis=1), node_capacities)
    states = np.diff(filled, axis=1, prepend=0)
    if min_replicas is not None:
        states[states.sum(axis=2) < np.asarray(min_replicas)] = 0
    return states


__all__ = ["MAX_NODES_PER_JOB", "RESET_PROBABILITY", "ZERO_ELEMENT_PROBABILITY",
           "ZERO_ROW_PROBABILITY", "crossover", "mutate", "repair"]
