"""Saturn's baselines: current practice, greedy list scheduling, random configurations.

Each is a serial list schedule: jobs in some order, each placed with an option on a node at
the earliest time >= its release at which its GPUs stay free for its whole runtime
(:class:`NodeTimeline`).

* ``saturn.current_practice``: what users do by hand - every job on all GPUs of one node
  (its largest feasible GPU count, with the fastest technique for it), first come first
  served, on the node that can start it first.
* ``saturn.greedy``: longest-processing-time first (by least runtime), each job taking the
  (option, node) that finishes it earliest.
* ``saturn.random``: a random order and a random option per job (seeded), earliest node.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

from schedlab.formulations.base import Heuristic
from schedlab.formulations.saturn.data import (
    NodeSpec,
    NodeTimeline,
    Option,
    SaturnData,
    entry,
    lower_bound,
    makespan,
    saturn_data,
    weighted_completion,
)
from schedlab.instance import Instance
from schedlab.solution import InstanceRef, ScheduleEntry, Solution, Status
from schedlab.workloads.saturn import random_saturn_instance

#: (job, option, node, start) of one placed job.
Placement = tuple[int, Option, NodeSpec, float]

#: Chooses the (option, node, start) of a job given the timeline.
Chooser = Callable[[SaturnData, int, NodeTimeline], tuple[Option, NodeSpec, float]]


def list_schedule(data: SaturnData, order: Sequence[int], choose: Chooser) -> list[Placement]:
    """Place jobs in ``order``, each where ``choose`` says; returns the placements."""
    timeline = NodeTimeline(data.nodes)
    placed: list[Placement] = []
    for j in order:
        option, node, start = choose(data, j, timeline)
        timeline.place(node.name, option.gpus, start, option.runtime)
        placed.append((j, option, node, start))
    return placed


def earliest_finish(
    data: SaturnData, j: int, timeline: NodeTimeline, options: Sequence[Option] | None = None
) -> tuple[Option, NodeSpec, float]:
    """The (option, node, start) finishing job j first (ties: fewer GPUs, then node order)."""
    best: tuple[float, int, int] | None = None
    choice: tuple[Option, NodeSpec, float] | None = None
    for option in options if options is not None else data.options[j]:
        for n, node in enumerate(data.nodes):
            if option.gpus > node.gpus:
                continue
            start = timeline.earliest(node.name, option.gpus, option.runtime, data.release[j])
            key = (start + option.runtime, option.gpus, n)
            if best is None or key < best:
                best, choice = key, (option, node, start)
    assert choice is not None, "saturn_data guarantees an option that fits a node"
    return choice


def greedy_order(data: SaturnData) -> list[int]:
    """Longest job first by its fastest runtime (LPT), then release, then input order."""
    return sorted(
        range(data.num_jobs),
        key=lambda j: (-min(o.runtime for o in data.options[j]), data.release[j], j),
    )


def greedy_placements(data: SaturnData) -> list[Placement]:
    """LPT order, each job at its earliest-finishing (option, node)."""
    return list_schedule(data, greedy_order(data), earliest_finish)


def current_practice_placements(data: SaturnData) -> list[Placement]:
    """FIFO, each job on a whole node: its largest feasible GPU count, fastest technique."""

    def whole_node(d: SaturnData, j: int, timeline: NodeTimeline) -> tuple[Option, NodeSpec, float]:
        widest = max(o.gpus for o in d.options[j])
        fastest = min((o for o in d.options[j] if o.gpus == widest), key=lambda o: o.runtime)
        return earliest_finish(d, j, timeline, [fastest])

    order = sorted(range(data.num_jobs), key=lambda j: (data.release[j], j))
    return list_schedule(data, order, whole_node)


def random_placements(data: SaturnData, seed: int = 0) -> list[Placement]:
    """A seeded random order and a random option per job, on the earliest node."""
    rng = random.Random(seed)
    order = list(range(data.num_jobs))
    rng.shuffle(order)
    picks = {j: rng.choice(data.options[j]) for j in order}

    def pick(d: SaturnData, j: int, timeline: NodeTimeline) -> tuple[Option, NodeSpec, float]:
        return earliest_finish(d, j, timeline, [picks[j]])

    return list_schedule(data, order, pick)


def to_schedule(data: SaturnData, placed: Sequence[Placement]) -> list[ScheduleEntry]:
    """Schedule entries sorted by start time."""
    return sorted(
        (entry(data, j, option, node, start) for j, option, node, start in placed),
        key=lambda e: (e.start, e.job),
    )


def schedule_solution(
    name: str,
    instance: Instance,
    data: SaturnData,
    schedule: list[ScheduleEntry],
    *,
    objective: str = "makespan",
    status: Status = Status.FEASIBLE,
) -> Solution:
    """A Solution for a timed schedule with makespan, weighted completion and lower bound."""
    span = makespan(schedule)
    wct = weighted_completion(schedule, data)
    bound = lower_bound(data) if objective == "makespan" else None
    value = span if objective == "makespan" else wct
    return Solution(
        instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
        formulation=name,
        status=status,
        objective=value,
        bound=bound,
        gap=(value - bound) / value if bound is not None and value > 0 else None,
        schedule=schedule,
        metrics={
            "makespan_s": span,
            "weighted_completion_s": wct,
            "lower_bound_s": lower_bound(data),
        },
    )


def saturn_example_instance() -> Instance:
    """The Saturn family's example: 3 random SPASE jobs on one node of 4 GPUs, seed 0
    (:func:`~schedlab.workloads.saturn.random_saturn_instance`)."""
    return random_saturn_instance(3, nodes=1, gpus_per_node=4, seed=0, name="example-saturn")


class SaturnHeuristic(Heuristic):
    """A baseline list scheduler (no model): ``feasible``, with the analytic lower bound."""

    def __init__(self, rule: str = "greedy", seed: int = 0, dominance: bool = True) -> None:
        self.rule = rule
        self.seed = seed
        self.dominance = dominance

    objective_sense = "minimize"

    def example_instance(self) -> Instance:
        """:func:`saturn_example_instance`."""
        return saturn_example_instance()

    def validate(self, instance: Instance) -> None:
        saturn_data(instance, formulation=self.name)

    def placements(self, data: SaturnData) -> list[Placement]:
        """The baseline's placements."""
        if self.rule == "current_practice":
            return current_practice_placements(data)
        if self.rule == "random":
            return random_placements(data, self.seed)
        return greedy_placements(data)

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """Makespan = latest end of the schedule, s (0 when empty)."""
        return makespan(solution.schedule)

    def run(self, instance: Instance) -> Solution:
        data = saturn_data(instance, dominance=self.dominance, formulation=self.name)
        schedule = to_schedule(data, self.placements(data))
        return schedule_solution(self.name, instance, data, schedule)


def serial_makespan(data: SaturnData, sequence: Sequence[tuple[int, Option, NodeSpec]]
                    ) -> tuple[float, list[Placement]]:
    """Place jobs in ``sequence`` with their fixed option and node, each at its earliest
    feasible start (serial schedule generation); returns (makespan s, placements)."""
    timeline = NodeTimeline(data.nodes)
    placed: list[Placement] = []
    end = 0.0
    for j, option, node in sequence:
        start = timeline.earliest(node.name, option.gpus, option.runtime, data.release[j])
        timeline.place(node.name, option.gpus, start, option.runtime)
        placed.append((j, option, node, start))
        end = max(end, start + option.runtime)
    return end, placed


def local_search(
    data: SaturnData,
    placed: Sequence[Placement],
    budget_s: float,
    seed: int = 0,
    max_moves: int | None = None,
) -> list[Placement]:
    """Polish a schedule for makespan: a random walk over (order, option, node) sequences
    decoded by :func:`serial_makespan`, starting from ``placed`` in start order (whose serial
    decoding is never longer than ``placed``: each job starts no later than before).  Moves:
    move a job elsewhere in the order, swap two jobs, or give a job another (option, node);
    a move is kept when the makespan does not grow.  Stops after ``budget_s`` seconds or
    ``max_moves`` moves and returns the best placements seen (deterministic per ``seed``
    when only ``max_moves`` binds)."""
    rng = random.Random(seed)
    sequence = [(j, o, n) for j, o, n, _ in sorted(placed, key=lambda p: (p[3], p[0]))]
    current, best_placed = serial_makespan(data, sequence)
    best = current
    choices = {j: [(o, n) for o in data.options[j] for n in data.nodes if data.fits(o, n)]
               for j in range(data.num_jobs)}
    stop = time.perf_counter() + budget_s
    moves = 0
    while len(sequence) > 1 and time.perf_counter() < stop:
        if max_moves is not None and moves >= max_moves:
            break
        moves += 1
        trial = list(sequence)
        i, k = rng.randrange(len(trial)), rng.randrange(len(trial))
        move = rng.random()
        if move < 0.4:
            trial.insert(k, trial.pop(i))
        elif move < 0.7:
            trial[i], trial[k] = trial[k], trial[i]
        else:
            j = trial[i][0]
            option, node = rng.choice(choices[j])
            trial[i] = (j, option, node)
        value, trial_placed = serial_makespan(data, trial)
        if value <= current + 1e-9:
            sequence, current = trial, value
            if value < best - 1e-9:
                best, best_placed = value, trial_placed
    return best_placed
