"""Incumbents for Saturn's makespan by late-acceptance search over list schedules (heuristic).

A list (an order of the jobs and one option per job) is decoded into a schedule by serial
schedule generation: each job in turn starts as early as its GPUs allow, on the node where it
finishes first (``list_kernel.decode``).  :func:`list_search` improves a start schedule by
late-acceptance hill climbing over lists (``list_kernel.late_acceptance``), compiled by numba,
in chunks of iterations between which it reads the clock: it stops at a deadline, when the
best makespan reaches ``stop_at`` (e.g. a proven lower bound divided by 1 - target gap), or
after ``stall_iterations`` iterations without a shorter schedule.  When a run stalls before
the deadline it restarts from the best list with a history that accepts lists up to
``reheat`` (2%) costlier at first (``restarts``).

Every schedule it returns is decoded from a list, so it is feasible (the tests check them
with ``NodeTimeline`` and the independent checker); it proves nothing: the bound of a solve
comes from elsewhere.  The timed ``TimeIndexed.solve`` uses it between the grid model and the
Benders phase (``docs/formulations/saturn.md``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedlab.formulations.saturn.baselines import Placement
from schedlab.formulations.saturn.data import SaturnData

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ListArrays:
    """The choices of every job as flat arrays: choice c = (``gpus[c]``, ``run[c]`` s,
    ``node[c]``, -1 = the node that finishes it first); job j's choices are
    ``first[j]`` .. ``first[j] + choices[j] - 1``, in the order of ``data.options[j]``."""

    gpus: np.ndarray
    run: np.ndarray
    node: np.ndarray
    first: np.ndarray
    choices: np.ndarray
    release: np.ndarray
    capacity: np.ndarray


def list_arrays(data: SaturnData) -> ListArrays:
    """:class:`ListArrays` of ``data``: one choice per option, node chosen when decoding."""
    gpus = [o.gpus for opts in data.options for o in opts]
    run = [o.runtime for opts in data.options for o in opts]
    choices = np.array([len(opts) for opts in data.options], dtype=np.int64)
    first = np.concatenate(([0], np.cumsum(choices)[:-1])).astype(np.int64)
    return ListArrays(
        gpus=np.array(gpus, dtype=np.int64), run=np.array(run, dtype=float),
        node=np.full(len(gpus), -1, dtype=np.int64), first=first, choices=choices,
        release=np.array(data.release, dtype=float),
        capacity=np.array([nd.gpus for nd in data.nodes], dtype=np.int64))


def _kernel() -> Any:
    """The numba kernel module, or None when it cannot be loaded."""
    try:
        from schedlab.formulations.saturn import list_kernel
    except (ImportError, RuntimeError, OSError) as exc:
        log.warning("the compiled list search is unavailable (%s); skipped", exc)
        return None
    return list_kernel


def warm_up() -> None:
    """Compile the kernel now (numba, first call after an install; later calls load numba's
    disk cache), so that it does not happen inside a timed solve."""
    if _WARM or _kernel() is None:
        return
    from schedlab.formulations.saturn.data import NodeSpec, Option

    node = NodeSpec("n", "gpu", 2)
    data = SaturnData(["a", "b"], [0.0, 0.0], [1.0, 1.0], [node],
                      [[Option(0, "t", 1, 1.0)], [Option(0, "t", 2, 1.0)]])
    start = [(0, data.options[0][0], node, 0.0), (1, data.options[1][0], node, 1.0)]
    list_search(data, start, time.perf_counter() + 60.0, chunk=10, stall_iterations=10,
                restarts=0)
    _WARM.append(True)


_WARM: list[bool] = []


def decode_list(data: SaturnData, arrays: ListArrays, order: Sequence[int] | np.ndarray,
                pick: Sequence[int] | np.ndarray) -> tuple[float, list[Placement]]:
    """(makespan s, placements) of the list (``order``, option ``pick[j]`` of job j)."""
    kernel = _kernel()
    if kernel is None:
        raise RuntimeError("the list decoder needs numba")
    jobs, nodes = data.num_jobs, len(data.nodes)
    starts = np.zeros(jobs)
    on = np.zeros(jobs, dtype=np.int64)
    span, _ = kernel.decode(np.asarray(order, dtype=np.int64), np.asarray(pick, dtype=np.int64),
                         arrays.gpus, arrays.run, arrays.node, arrays.first, arrays.release,
                         arrays.capacity, np.zeros((nodes, 2 * jobs + 2)),
                         np.zeros((nodes, 2 * jobs + 2), dtype=np.int64),
                         np.zeros(nodes, dtype=np.int64), starts, on, np.zeros(nodes))
    placed = [(j, data.options[j][int(pick[j])], data.nodes[int(on[j])], float(starts[j]))
              for j in range(jobs)]
    return float(span), placed


@dataclass
class ListSearchResult:
    """Outcome of :func:`list_search`: the best ``makespan`` (s) and its ``placements``,
    ``iterations`` run, ``restarts`` made, and ``log`` of (perf_counter, best makespan)
    at every improvement."""

    makespan: float
    placements: list[Placement]
    iterations: int = 0
    restarts: int = 0
    log: list[tuple[float, float]] = field(default_factory=list)


def list_search(
    data: SaturnData,
    start: Sequence[Placement],
    deadline: float,
    *,
    stop_at: float = 0.0,
    stall_iterations: int = 400_000,
    restarts: int = 1_000,
    history: int = 2_000,
    chunk: int = 20_000,
    end_weight: float = 0.1,
    energy_weight: float = 0.15,
    seed: int = 0,
    max_iterations: int | None = None,
    reheat: float = 0.02,
) -> ListSearchResult:
    """Improve the schedule ``start`` (placements, any feasible schedule) until ``deadline``
    (``time.perf_counter``), until the best makespan is <= ``stop_at`` (s), or until
    ``restarts`` runs have each gone ``stall_iterations`` iterations without a shorter
    schedule (module docstring).  ``end_weight``, ``energy_weight``: the cost's tie-breaking
    terms (``list_kernel``).  The start list is ``start`` in order of start time with
    its options.  Returns ``start`` itself (decoded again) when nothing shorter is found.
    ``max_iterations``: stop after that many iterations (whole chunks) as well.  A restart
    starts from the best list with a history of (1 + ``reheat``) x its cost, so that it may
    leave that list's basin (a plain restart would accept only what the stalled run did).
    Deterministic for a given ``seed`` when the deadline does not bind."""
    kernel = _kernel()
    arrays = list_arrays(data)
    order = np.array([j for j, _, _, _ in sorted(start, key=lambda p: (p[3], p[0]))],
                     dtype=np.int64)
    pick = np.zeros(data.num_jobs, dtype=np.int64)
    for j, option, _, _ in start:
        pick[j] = data.options[j].index(option)
    start_span = max((s + o.runtime for _, o, _, s in start), default=0.0)
    result = ListSearchResult(start_span, list(start))
    if kernel is None or data.num_jobs < 2:
        return result
    span, _ = decode_list(data, arrays, order, pick)
    best_order, best_pick = order.copy(), pick.copy()
    state = np.array([np.nan, span, 0.0])
    hist = np.full(history, np.nan)
    since = 0  # iterations since the last improvement
    runs = 0
    while time.perf_counter() < deadline and state[1] > stop_at and (
            max_iterations is None or result.iterations < max_iterations):
        before = state[1]
        kernel.late_acceptance(order, pick, hist, state, best_order, best_pick, arrays.gpus,
                               arrays.run, arrays.node, arrays.first, arrays.choices,
                               arrays.release, arrays.capacity, chunk,
                               seed * 1_000_003 + result.iterations // chunk, end_weight,
                               energy_weight, reheat if result.restarts else 0.0)
        result.iterations += chunk
        if state[1] < before:
            since = 0
            result.log.append((time.perf_counter(), float(state[1])))
        else:
            since += chunk
        if since >= stall_iterations:
            runs += 1
            if runs > restarts:
                break
            # restart from the best list with a fresh history
            order[:], pick[:] = best_order, best_pick
            state[0] = np.nan
            since = 0
            result.restarts += 1
    best_span, placed = decode_list(data, arrays, best_order, best_pick)
    if best_span < start_span - 1e-9:
        result.makespan, result.placements = best_span, placed
    log.debug("list search: %d iterations, %d restarts, %.1f -> %.1f", result.iterations,
              result.restarts, start_span, result.makespan)
    assert math.isfinite(result.makespan)
    return result
