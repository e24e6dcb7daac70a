"""The re-planning MILP of Saturn's introspection: the remaining work from ``now`` on a grid.

At a boundary t of a node-level run (:mod:`schedlab.formulations.saturn.execution`) every
unfinished job j has progress phi_j and an estimated factor f^_j (the observed f_j once it has
run, else 1).  A *move* is one way to run the rest of a job from t: *keep* its running segment
(same option and node, only at slot 0), or start / restart any option on any node that fits.
Durations (s): keep = remaining restart overhead + (1 - phi_j) f^_j r[j,o]; other moves =
rho [j has a checkpoint] + (1 - phi_j) f^_j r[j,o], rho = restart cost (a running job that does
not keep is checkpointed at t).  :func:`build_replan` states the model; its grid has
``delta`` s slots from t (slot 0 = now).  The model and its choices are explained in
``docs/formulations/saturn.md`` (section "Introspection").
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyomo.environ as pyo

from schedlab.formulations.saturn.data import NodeSpec, Option, SaturnData
from schedlab.formulations.saturn.execution import EPS, Execution, Runtime


@dataclass(frozen=True)
class Move:
    """A way to run job ``job`` from now: ``option`` on node ``node`` for ``duration`` s
    (restart cost included); ``keep`` = continue the running segment (only at slot 0)."""

    job: int
    option: Option
    node: int
    duration: float
    keep: bool


def replan_moves(
    ex: Execution, estimate: Runtime, restart_cost: float
) -> list[Move]:
    """Every move of every unfinished job at ``ex.now`` (after :meth:`Execution.rebase`).

    Keep: remaining restart overhead + (1 - phi) r^ on the running option and node.  Other
    moves: (1 - phi) r^[o] plus the restart cost when the job has a checkpoint (it ran before,
    or it is running now and would be stopped).
    """
    data = ex.data
    moves: list[Move] = []
    for j in ex.unfinished():
        run = ex.running.get(j)
        phi = ex.current_progress(j, estimate)
        if run is not None:
            left = max(0.0, run.overhead_until - ex.now)
            moves.append(Move(j, run.option, run.node,
                              left + (1 - phi) * estimate(j, run.option), True))
        restore = ex.closed[j] > 0 or (run is not None and run.seg_start < ex.now - EPS)
        for option in data.options[j]:
            for n, node in enumerate(data.nodes):
                if option.gpus <= node.gpus:
                    moves.append(Move(j, option, n,
                                      (restart_cost if restore else 0.0)
                                      + (1 - phi) * estimate(j, option), False))
    return moves


def grid_list_schedule(
    moves: Sequence[Move], order: Sequence[Move], nodes: Sequence[NodeSpec],
    release_slots: Mapping[int, int], slots: Mapping[Move, int],
) -> dict[int, tuple[Move, int]]:
    """Serial schedule on the grid: each move of ``order`` at its earliest slot >= its job's
    release slot where its GPUs are free for its ``slots`` (keep moves at slot 0)."""
    usage: dict[int, list[int]] = {n: [] for n in range(len(nodes))}
    placed: dict[int, tuple[Move, int]] = {}
    for move in order:
        p = slots[move]
        use = usage[move.node]
        t = 0 if move.keep else release_slots[move.job]
        while True:
            need = t + p
            if len(use) < need:
                use.extend([0] * (need - len(use)))
            if all(use[tau] + move.option.gpus <= nodes[move.node].gpus
                   for tau in range(t, need)):
                break
            assert not move.keep, "running jobs fit together at slot 0"
            t += 1
        for tau in range(t, t + p):
            use[tau] += move.option.gpus
        placed[move.job] = (move, t)
    return placed


def build_replan(
    data: SaturnData,
    moves: Sequence[Move],
    delta: float,
    release_slots: Mapping[int, int],
    start: Mapping[int, tuple[Move, int]],
) -> pyo.ConcreteModel:
    """The re-planning MILP on a grid of ``delta`` s slots from now (t = 0 is now).

    p_m = ceil(duration_m / delta) slots; horizon T = makespan of the warm start ``start``
    (the current plan on the grid, so an optimum fits).  Binaries x[m,t] = 1 when move m
    starts at slot t (keep moves: t = 0 only; others t >= release slot, t + p_m <= T):

    * ``one_start[j]``:    sum_{m of j, t} x[m,t] = 1
    * ``capacity[n,tau]``: sum_{m on n, t <= tau < t + p_m} g_m x[m,t] <= G_n
    * ``finish[j]``:       C >= sum_{m of j, t} (t + p_m) x[m,t]
    * ``energy[n]``:       G_n C >= sum_{m on n, t} g_m p_m x[m,t];  ``energy_all`` the same
      summed over nodes
    * objective: C + eps sum_{restarting moves of running jobs} x, eps = 1/(2(J+1)), so that
      among plans of equal makespan (in slots) the one stopping fewer running jobs wins.
    """
    slots = {m: max(1, math.ceil(m.duration / delta - 1e-9)) for m in moves}
    horizon = max(t + slots[m] for m, t in start.values())
    index: list[tuple[int, int]] = []
    for k, m in enumerate(moves):
        if m.keep:
            index.append((k, 0))
        else:
            index += [(k, t) for t in range(release_slots[m.job], horizon - slots[m] + 1)]
    model = pyo.ConcreteModel(name="saturn.introspective.replan")
    model.START = pyo.Set(initialize=index, dimen=2, ordered=True)
    model.x = pyo.Var(model.START, domain=pyo.Binary)
    by_job: dict[int, list[Any]] = defaultdict(list)
    finish: dict[int, list[Any]] = defaultdict(list)
    usage: dict[tuple[int, int], list[Any]] = defaultdict(list)
    work: dict[int, list[Any]] = defaultdict(list)
    restarts: list[Any] = []
    running = {m.job for m in moves if m.keep}
    for k, t in index:
        m, x = moves[k], model.x[k, t]
        p, g = slots[m], m.option.gpus
        by_job[m.job].append(x)
        finish[m.job].append((t + p) * x)
        work[m.node].append(g * p * x)
        for tau in range(t, t + p):
            usage[m.node, tau].append(g * x)
        if m.job in running and not m.keep:
            restarts.append(x)
    jobs = sorted(by_job)
    model.J = pyo.Set(initialize=jobs)
    model.one_start = pyo.Constraint(model.J, rule=lambda mm, j: pyo.quicksum(by_job[j]) == 1)
    model.NT = pyo.Set(initialize=sorted(usage), dimen=2)
    model.capacity = pyo.Constraint(
        model.NT, rule=lambda mm, n, tau: pyo.quicksum(usage[n, tau]) <= data.nodes[n].gpus)
    model.C = pyo.Var(bounds=(0, horizon))
    model.finish = pyo.Constraint(
        model.J, rule=lambda mm, j: mm.C >= pyo.quicksum(finish[j]))
    model.N = pyo.Set(initialize=sorted(work))
    model.energy = pyo.Constraint(
        model.N, rule=lambda mm, n: data.nodes[n].gpus * mm.C >= pyo.quicksum(work[n]))
    total = sum(data.nodes[n].gpus for n in work)
    model.energy_all = pyo.Constraint(
        expr=total * model.C >= pyo.quicksum(t for n in work for t in work[n]))
    eps = 1.0 / (2 * (len(jobs) + 1))
    model.obj = pyo.Objective(expr=model.C + eps * pyo.quicksum(restarts))
    # Warm start: the current plan on the grid.
    position = {m: k for k, m in enumerate(moves)}
    chosen = {(position[m], t) for m, t in start.values()}
    for key in index:
        model.x[key].value = 1.0 if key in chosen else 0.0
    model.C.value = horizon
    model.moves = list(moves)
    model.slots = slots
    model.delta = delta
    model.horizon_slots = horizon
    return model
