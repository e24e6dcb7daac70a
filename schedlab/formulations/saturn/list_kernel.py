"""Compiled (numba) list-schedule decoder and late-acceptance search for Saturn's makespan.

A *list* is an order of the jobs and one choice per job; a choice c is (g_c GPUs, r_c s,
node n_c), with n_c = -1 for "the node where the job finishes first".  :func:`decode` places
the jobs in list order, each at the earliest start t >= a_j at which g_c GPUs stay free on
its node during [t, t + r_c) (serial schedule generation, as
``baselines.serial_makespan``; with n_c = -1 the node with the earliest end t + r_c, ties
to the lower index).  A node's GPUs in use are a step function kept as sorted breakpoints:
``pt[k]`` (s) with ``pu[k]`` GPUs in use on [pt[k], pt[k+1]) (the last step runs to
infinity with 0 in use).  The candidate starts are a_j and the breakpoints after it; a
start that overlaps a step with too many GPUs in use moves to the end of that step.

:func:`late_acceptance` is late-acceptance hill climbing (Burke and Bykov, 2017) over lists:
a trial list is accepted when its cost is at most the current cost or the cost accepted
``history`` iterations earlier.  Moves: move one job to another place of the order, swap two
jobs, give one job another choice (half of these also move it).  The cost is the makespan
plus ``end_weight`` x (mean of the nodes' last ends) plus ``energy_weight`` x (GPU-seconds
of the chosen options / GPUs of all nodes): among lists of equal makespan it prefers those
whose other nodes end earlier and whose options waste fewer GPU-seconds (room to shorten
later).  Every decoded list is a feasible schedule: this is a heuristic for incumbents, it
proves nothing.

No clock is read inside (numba cannot): the caller runs it in chunks of iterations.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: time comparisons are made with this slack (s)
EPS = 1e-9


@njit(cache=True)
def _earliest(pt: np.ndarray, pu: np.ndarray, count: int, capacity: int, gpus: int,
              runtime: float, ready: float) -> float:
    """First t >= ready with ``gpus`` GPUs free on [t, t + runtime) (one node's steps)."""
    t = ready
    k = 0
    while k + 1 < count and pt[k + 1] <= t + EPS:
        k += 1
    while True:
        s = k
        free = True
        while s < count and pt[s] < t + runtime - EPS:
            if pu[s] + gpus > capacity:
                free = False
                break
            s += 1
        if free:
            return t
        # the step s is too full: the next candidate is its end (the last step is empty)
        t = pt[s + 1]
        k = s + 1


@njit(cache=True)
def _split(pt: np.ndarray, pu: np.ndarray, count: int, t: float) -> int:
    """Make ``t`` a breakpoint of one node's steps; returns the new count."""
    k = 0
    while k < count and pt[k] < t - EPS:
        k += 1
    if k < count and abs(pt[k] - t) <= EPS:
        return count
    for i in range(count, k, -1):
        pt[i] = pt[i - 1]
        pu[i] = pu[i - 1]
    pt[k] = t
    pu[k] = pu[k - 1] if k > 0 else 0
    return count + 1


@njit(cache=True)
def decode(order: np.ndarray, pick: np.ndarray, gpus: np.ndarray, run: np.ndarray,
           node: np.ndarray, first: np.ndarray, release: np.ndarray, capacity: np.ndarray,
           pt: np.ndarray, pu: np.ndarray, count: np.ndarray, starts: np.ndarray,
           nodes: np.ndarray, node_end: np.ndarray) -> tuple[float, float]:
    """Place the list (``order``, choice ``first[j] + pick[j]`` of job j); fills ``starts``
    (s), ``nodes`` and ``node_end`` (last end per node, s) and returns (makespan s,
    GPU-seconds of the chosen options).
    ``pt``, ``pu`` (nodes x (2 jobs + 2)) and ``count`` are work arrays."""
    span, energy, _ = _decode(order, pick, gpus, run, node, first, release, capacity, pt, pu,
                              count, starts, nodes, node_end, np.inf, np.inf, 0.0, 0.0)
    return span, energy


@njit(cache=True)
def _decode(order: np.ndarray, pick: np.ndarray, gpus: np.ndarray, run: np.ndarray,
            node: np.ndarray, first: np.ndarray, release: np.ndarray, capacity: np.ndarray,
            pt: np.ndarray, pu: np.ndarray, count: np.ndarray, starts: np.ndarray,
            nodes: np.ndarray, node_end: np.ndarray, threshold: float, shortest: float,
            end_weight: float, energy_weight: float) -> tuple[float, float, bool]:
    """:func:`decode` that gives up (returns complete = False) as soon as the partial list
    can neither be accepted nor be the shortest: its cost (``late_acceptance``'s, with
    ``end_weight``, ``energy_weight``) exceeds ``threshold`` and its makespan reaches
    ``shortest``.  Every term of the cost, and the makespan, only grow as jobs are added,
    so the complete list would fail both tests too."""
    num_nodes = capacity.shape[0]
    total_gpus = capacity.sum()
    for n in range(num_nodes):
        count[n] = 1
        pt[n, 0] = 0.0
        pu[n, 0] = 0
        node_end[n] = 0.0
    span = 0.0
    energy = 0.0
    end_sum = 0.0
    margin = threshold + 1e-9 * max(1.0, abs(threshold))
    for idx in range(order.shape[0]):
        j = order[idx]
        c = first[j] + pick[j]
        g = gpus[c]
        r = run[c]
        n = node[c]
        if n < 0:  # the node where it ends first (every option fits some node)
            best = np.inf
            n = 0
            t = 0.0
            for m in range(num_nodes):
                if g <= capacity[m]:
                    tm = _earliest(pt[m], pu[m], count[m], capacity[m], g, r, release[j])
                    if tm + r < best - EPS:
                        best = tm + r
                        n = m
                        t = tm
        else:
            t = _earliest(pt[n], pu[n], count[n], capacity[n], g, r, release[j])
        count[n] = _split(pt[n], pu[n], count[n], t)
        count[n] = _split(pt[n], pu[n], count[n], t + r)
        for s in range(count[n]):
            if pt[n, s] >= t - EPS and pt[n, s] < t + r - EPS:
                pu[n, s] += g
        starts[j] = t
        nodes[j] = n
        energy += g * r
        end = t + r
        if end > node_end[n]:
            end_sum += end - node_end[n]
            node_end[n] = end
        if end > span:
            span = end
        if span >= shortest - EPS and (span + end_weight * end_sum / num_nodes
                                       + energy_weight * energy / total_gpus) > margin:
            return span, energy, False
    return span, energy, True


@njit(cache=True)
def _move(order: np.ndarray, a: int, b: int) -> None:
    """Move the entry at position a to position b."""
    x = order[a]
    if a < b:
        for i in range(a, b):
            order[i] = order[i + 1]
    else:
        for i in range(a, b, -1):
            order[i] = order[i - 1]
    order[b] = x


@njit(cache=True)
def late_acceptance(order: np.ndarray, pick: np.ndarray, history: np.ndarray, state: np.ndarray,
                    best_order: np.ndarray, best_pick: np.ndarray, gpus: np.ndarray,
                    run: np.ndarray, node: np.ndarray, first: np.ndarray, choices: np.ndarray,
                    release: np.ndarray, capacity: np.ndarray, iterations: int, seed: int,
                    end_weight: float, energy_weight: float, slack: float = 0.0) -> None:
    """``iterations`` steps of late acceptance (module docstring) from the current list
    (``order``, ``pick``, updated in place) with the cost history ``history`` (updated;
    its step counter is ``state[2]``).  ``state`` = [current cost (NaN: compute it and fill
    the history with (1 + ``slack``) x it, so that for the next ``history`` steps lists up to
    ``slack`` worse may be accepted), best makespan, step]:
    the shortest list seen is kept in ``best_order``, ``best_pick`` (updated when any trial
    list, accepted or not, is shorter than ``state[1]``).  ``choices[j]``: how many choices
    job j has."""
    np.random.seed(seed)
    jobs = order.shape[0]
    num_nodes = capacity.shape[0]
    width = 2 * jobs + 2
    pt = np.zeros((num_nodes, width))
    pu = np.zeros((num_nodes, width), dtype=np.int64)
    count = np.zeros(num_nodes, dtype=np.int64)
    starts = np.zeros(jobs)
    nodes = np.zeros(jobs, dtype=np.int64)
    node_end = np.zeros(num_nodes)
    trial_order = order.copy()
    trial_pick = pick.copy()
    length = history.shape[0]
    total_gpus = capacity.sum()
    if np.isnan(state[0]):  # a fresh start: the current list's cost fills the history
        span, energy = decode(order, pick, gpus, run, node, first, release, capacity, pt, pu,
                              count, starts, nodes, node_end)
        state[0] = (span + end_weight * node_end.sum() / num_nodes
                    + energy_weight * energy / total_gpus)
        history[:] = state[0] * (1.0 + slack)
    for _ in range(iterations):
        trial_order[:] = order
        trial_pick[:] = pick
        u = np.random.random()
        a = np.random.randint(jobs)
        b = np.random.randint(jobs)
        if u < 0.35:
            _move(trial_order, a, b)
        elif u < 0.6:
            x = trial_order[a]
            trial_order[a] = trial_order[b]
            trial_order[b] = x
        else:
            j = trial_order[a]
            trial_pick[j] = np.random.randint(choices[j])
            if u > 0.8:
                _move(trial_order, a, b)
        step = int(state[2]) % length
        state[2] += 1
        span, energy, complete = _decode(
            trial_order, trial_pick, gpus, run, node, first, release, capacity, pt, pu, count,
            starts, nodes, node_end, max(state[0], history[step]), state[1], end_weight,
            energy_weight)
        if not complete:  # rejected, and not the shortest: the history step stays as is
            if state[0] < history[step]:
                history[step] = state[0]
            continue
        cost = (span + end_weight * node_end.sum() / num_nodes
                + energy_weight * energy / total_gpus)
        if span < state[1] - EPS:  # the shortest list seen, accepted or not
            state[1] = span
            best_order[:] = trial_order
            best_pick[:] = trial_pick
        if cost <= state[0] or cost <= history[step]:
            order[:] = trial_order
            pick[:] = trial_pick
            state[0] = cost
        if state[0] < history[step]:
            history[step] = state[0]
