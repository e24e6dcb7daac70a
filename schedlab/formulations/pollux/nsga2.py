"""NSGA-II as pymoo 0.4.2.1 runs it for Pollux, written anew (no pymoo dependency).

Pollux (``PX/pollux.py:165-173``, petuum/adaptdl ``osdi21-artifact`` at c793c70) calls
``NSGA2(pop_size=100, sampling=<states>, crossover, mutation, repair)`` and
``minimize(problem, algorithm, ("n_gen", 100))``.  What that does, read from pymoo 0.4.2.1
(file names under ``pymoo/``), and what this module does the same way:

* **Initial population** (``model/initialization.py``): the given individuals, repaired,
  exact duplicates removed (the later copy goes); *not* filled up to ``pop_size`` (Pollux's
  first round starts from a population of one).  It is evaluated and passed through the
  survival once with n_survive = its size, to rank it and give it crowding distances
  (``algorithms/genetic_algorithm.py`` ``_initialize``).  This is generation 1.
* **Each further generation** (``_next``) until generation ``generations`` (so 99 matings
  for 100 generations, ``util/termination/max_gen.py``):

  - *mating* (``model/infill.py``, ``model/mating.py``): while fewer than ``n_offsprings``
    offspring are collected: select ceil(remaining / 2) parent pairs by binary tournament;
    cross each pair over with probability 0.9 (``model/crossover.py``), giving two children
    (all first children, then all second children); mutate every child; repair; drop exact
    duplicates of an earlier child of this batch, of the population or of the offspring
    collected so far (``model/duplicate.py``, distance < 1e-16); keep at most the remaining
    number, first ones first; give up after 101 batches (``n_infills > 100``).  No
    offspring at all ends the run;
  - evaluate the offspring, merge them after the population, and keep ``pop_size`` by
    rank-and-crowding survival.

* **Binary tournament** (``operators/selection/tournament_selection.py``, ``algorithms/
  nsga2.py:binary_tournament``, type ``comp_by_dom_and_crowding``): candidates are taken
  from concatenated random permutations of the population; a candidate that dominates the
  other wins, else the larger crowding distance, else a fair coin.  Rank is not used.
* **Non-dominated sorting** (``util/nds/fast_non_dominated_sort.py``, ``util/dominator.py``):
  a dominates b when F_a <= F_b everywhere and < somewhere; front k+1 is what only fronts
  <= k dominate.  Sorting stops once the fronts so far hold n_survive individuals
  (``n_stop_if_ranked``).
* **Crowding distance** (``algorithms/nsga2.py:calc_crowding_distance``): fronts of at most
  2 points get +inf; otherwise points whose F equals an earlier point's (distance < 1e-24)
  get 0 and are left out; over the remaining unique points, per objective i sorted
  (stable), d_i = (F_next - F_prev) / (max_i - min_i), with -inf / +inf neighbours beyond
  the ends (so the extreme points get +inf) and 0 for an objective whose values are all
  equal (the 0/0 and inf/0 cases become NaN, then 0); crowding = sum_i d_i / n_obj.  Three
  or more copies of one point thus all get 0, while a front of two copies gets +inf.
* **Survival** (``algorithms/nsga2.py:RankAndCrowdingSurvival``): whole fronts in order
  while they fit; the front that does not fit is cut by crowding distance, descending,
  ties in random order.  Each survivor keeps the rank and crowding of the merged
  population's sorting.
* **Result** (``NSGA2._set_optimum``): the survivors of rank 0 (the non-dominated front).

There are no constraints (every CV is 0), so pymoo's feasibility branches never fire.
Randomness: one ``numpy.random.Generator``; pymoo reseeds numpy's global generator from
itself each run (``model/algorithm.py`` ``setup``), unseeded in Pollux.  Differences that
change no distribution: fronts list their members in index order (pymoo's later fronts are
in discovery order), which only changes which of two identical-F states comes first.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: pymoo's defaults as Pollux uses them.
POP_SIZE = 100
GENERATIONS = 100
CROSSOVER_PROBABILITY = 0.9
MAX_MATING_ITERATIONS = 100


class GeneticProblem(Protocol):
    """The problem-specific parts of the search, on populations shaped (P, ...)."""

    def evaluate(self, population: IntArray) -> FloatArray:
        """The objectives to minimise, (P, M)."""
        ...

    def crossover(self, first: IntArray, second: IntArray,
                  rng: np.random.Generator) -> tuple[IntArray, IntArray]:
        """Two children per pair of parents."""
        ...

    def mutate(self, population: IntArray, rng: np.random.Generator) -> IntArray:
        """Mutated copies."""
        ...

    def repair(self, population: IntArray, rng: np.random.Generator) -> IntArray:
        """Feasible copies."""
        ...


def domination(F: FloatArray) -> IntArray:
    """M[a, b] = 1 if a dominates b, -1 if b dominates a, else 0 (``util/dominator.py``
    ``calc_domination_matrix``)."""
    smaller = np.zeros((len(F), len(F)), dtype=bool)
    larger = np.zeros((len(F), len(F)), dtype=bool)
    for column in F.T:
        smaller |= column[:, None] < column[None, :]
        larger |= column[:, None] > column[None, :]
    return (smaller & ~larger).astype(np.int64) - (larger & ~smaller).astype(np.int64)


def non_dominated_fronts(F: FloatArray, stop_after: int | None = None) -> list[IntArray]:
    """The fronts of ``F`` (P, M) as index arrays, best first, until they hold at least
    ``stop_after`` points (all of them when None)."""
    dominates = domination(F) == 1
    dominated_by = dominates.sum(axis=0)
    remaining = np.ones(len(F), dtype=bool)
    stop = len(F) if stop_after is None else min(stop_after, len(F))
    fronts: list[IntArray] = []
    ranked = 0
    while ranked < stop:
        front = np.flatnonzero(remaining & (dominated_by == 0))
        fronts.append(front)
        ranked += len(front)
        remaining[front] = False
        dominated_by = dominated_by - dominates[front].sum(axis=0)
    return fronts


def crowding_distance(F: FloatArray) -> FloatArray:
    """pymoo 0.4.2.1's crowding distance of one front (module docstring)."""
    num_points, num_objectives = F.shape
    if num_points <= 2:
        return np.full(num_points, np.inf)
    earlier_equal = np.tril(np.all(F[:, None, :] == F[None, :, :], axis=2), k=-1)
    unique = np.flatnonzero(~earlier_equal.any(axis=1))
    points = F[unique]
    order = np.argsort(points, axis=0, kind="mergesort")
    columns = np.arange(num_objectives)
    ordered = points[order, columns]
    gaps = (np.vstack([ordered, np.full(num_objectives, np.inf)])
            - np.vstack([np.full(num_objectives, -np.inf), ordered]))
    span = ordered.max(axis=0) - ordered.min(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = np.where(span == 0, np.nan, span)
        to_previous = gaps[:-1] / norm
        to_next = gaps[1:] / norm
    to_previous[np.isnan(to_previous)] = 0.0
    to_next[np.isnan(to_next)] = 0.0
    rank_of = np.argsort(order, axis=0)
    crowding = np.zeros(num_points)
    crowding[unique] = np.sum(to_previous[rank_of, columns] + to_next[rank_of, columns],
                              axis=1) / num_objectives
    return crowding


@dataclass(frozen=True)
class Survivors:
    """Who survives (``indices`` into the merged population, front by front), and their
    ``rank`` (front number) and ``crowding`` distance."""

    indices: IntArray
    rank: IntArray
    crowding: FloatArray


def rank_and_crowding_survival(F: FloatArray, n_survive: int,
                               rng: np.random.Generator) -> Survivors:
    """Keep min(``n_survive``, P) points: whole fronts while they fit, the splitting front
    by crowding distance, descending, ties at random."""
    n_survive = min(n_survive, len(F))
    indices: list[IntArray] = []
    ranks: list[IntArray] = []
    crowdings: list[FloatArray] = []
    kept = 0
    for rank, front in enumerate(non_dominated_fronts(F, stop_after=n_survive)):
        crowding = crowding_distance(F[front])
        chosen = np.arange(len(front))
        if kept + len(front) > n_survive:
            shuffled = rng.permutation(len(front))
            chosen = shuffled[np.argsort(-crowding[shuffled], kind="stable")]
            chosen = chosen[:n_survive - kept]
        indices.append(front[chosen])
        ranks.append(np.full(len(chosen), rank, dtype=np.int64))
        crowdings.append(crowding[chosen])
        kept += len(chosen)
    return Survivors(np.concatenate(indices), np.concatenate(ranks), np.concatenate(crowdings))


def binary_tournament(F: FloatArray, crowding: FloatArray, num_matings: int,
                      rng: np.random.Generator) -> IntArray:
    """Parent pairs (``num_matings``, 2), indices into the population: 4 candidates per
    mating from concatenated random permutations; each pair of candidates is decided by
    domination, then larger crowding distance, then a fair coin."""
    size = len(F)
    needed = 4 * num_matings
    candidates = np.concatenate([rng.permutation(size)
                                 for _ in range(math.ceil(needed / size))])[:needed]
    a, b = candidates.reshape(-1, 2).T
    a_better = np.any(F[a] < F[b], axis=1)
    b_better = np.any(F[b] < F[a], axis=1)
    coin = rng.integers(2, size=len(a)) == 0
    a_wins = [a_better & ~b_better, b_better & ~a_better,
              crowding[a] > crowding[b], crowding[b] > crowding[a]]
    winner = np.select(a_wins, [a, b, a, b], np.where(coin, a, b))
    return winner.reshape(num_matings, 2)


def duplicates(candidates: IntArray, existing: IntArray) -> BoolArray:
    """Whether each candidate equals an earlier candidate or any ``existing`` individual
    (exact equality of the whole individual)."""
    if len(candidates) == 0:
        return np.zeros(0, dtype=bool)
    rows = np.concatenate([existing, candidates])
    rows = rows.reshape(len(rows), int(np.prod(rows.shape[1:])))
    if rows.size and 0 <= rows.min() and rows.max() < 256:
        # One byte per element, packed 8 to a word: the hash below costs 8 times less.
        packed = np.zeros((len(rows), -(-rows.shape[1] // 8) * 8), dtype=np.uint8)
        packed[:, :rows.shape[1]] = rows
        words = packed.view(np.int64)
    else:
        words = np.ascontiguousarray(rows, dtype=np.int64)
    # A hash per row (int64 arithmetic wraps), then a check that every row called a copy
    # equals the first row with its hash; on a collision, compare the words exactly.
    copy_of = _first_equal(words @ _hash_weights(words.shape[1]))
    if not np.array_equal(words[copy_of], words):
        copy_of = _first_equal(words.view(np.dtype((np.void, 8 * words.shape[1]))).ravel())
    return (copy_of < np.arange(len(rows)))[len(existing):]


def _first_equal(keys: npt.NDArray[Any]) -> IntArray:
    """For each key, the index of its first occurrence."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first[inverse.ravel()]


@functools.lru_cache(maxsize=64)
def _hash_weights(width: int) -> IntArray:
    """Fixed pseudo-random weights for the row hashes of :func:`duplicates` (any weights
    give the same result; these only make collisions unlikely)."""
    return np.random.default_rng(width).integers(1, 2 ** 62, size=width)


@dataclass(frozen=True)
class NSGA2Result:
    """The final ``population`` (P, ...), its objectives ``F`` (P, M), the indices of its
    rank-0 (non-dominated) ``front``, and how many ``generations`` ran (the initial
    population counts as generation 1)."""

    population: IntArray
    F: FloatArray
    front: IntArray
    generations: int
    evaluations: int


def _mate(population: IntArray, F: FloatArray, crowding: FloatArray, problem: GeneticProblem,
          rng: np.random.Generator, n_offsprings: int, crossover_probability: float,
          max_iterations: int) -> IntArray:
    """One generation's offspring (``model/infill.py`` ``InfillCriterion.do``)."""
    offspring = population[:0]
    batches = 0
    while len(offspring) < n_offsprings:
        remaining = n_offsprings - len(offspring)
        parents = binary_tournament(F, crowding, math.ceil(remaining / 2), rng)
        first, second = population[parents[:, 0]], population[parents[:, 1]]
        crossed = rng.random(len(parents)) < crossover_probability
        child_a, child_b = problem.crossover(first, second, rng)
        mask = crossed.reshape((-1,) + (1,) * (first.ndim - 1))
        children = np.concatenate([np.where(mask, child_a, first),
                                   np.where(mask, child_b, second)])
        children = problem.repair(problem.mutate(children, rng), rng)
        children = children[~duplicates(children, np.concatenate([population, offspring]))]
        offspring = np.concatenate([offspring, children[:remaining]])
        batches += 1
        if batches > max_iterations:
            break
    return offspring


def nsga2(initial: IntArray, problem: GeneticProblem, rng: np.random.Generator, *,
          pop_size: int = POP_SIZE, n_offsprings: int | None = None,
          generations: int = GENERATIONS,
          crossover_probability: float = CROSSOVER_PROBABILITY,
          max_mating_iterations: int = MAX_MATING_ITERATIONS) -> NSGA2Result:
    """Run NSGA-II from the individuals ``initial`` (P0, ...) for ``generations``
    generations (module docstring); ``n_offsprings`` defaults to ``pop_size``."""
    if len(initial) == 0:
        raise ValueError("NSGA-II needs at least one initial individual")
    if pop_size < 1 or generations < 1:
        raise ValueError("pop_size and generations must be >= 1")
    n_offsprings = pop_size if n_offsprings is None else n_offsprings
    population = problem.repair(np.asarray(initial), rng)
    population = population[~duplicates(population, population[:0])]
    F = problem.evaluate(population)
    evaluations = len(population)
    survivors = rank_and_crowding_survival(F, len(population), rng)
    population, F = population[survivors.indices], F[survivors.indices]
    generation = 1
    while generation < generations:
        offspring = _mate(population, F, survivors.crowding, problem, rng, n_offsprings,
                          crossover_probability, max_mating_iterations)
        if len(offspring) == 0:
            break
        generation += 1
        offspring_F = problem.evaluate(offspring)
        evaluations += len(offspring)
        merged = np.concatenate([population, offspring])
        merged_F = np.concatenate([F, offspring_F])
        survivors = rank_and_crowding_survival(merged_F, pop_size, rng)
        population, F = merged[survivors.indices], merged_F[survivors.indices]
    return NSGA2Result(population, F, np.flatnonzero(survivors.rank == 0), generation,
                       evaluations)


__all__ = ["CROSSOVER_PROBABILITY", "GENERATIONS", "MAX_MATING_ITERATIONS", "POP_SIZE",
           "GeneticProblem", "NSGA2Result", "Survivors", "binary_tournament",
           "crowding_distance", "domination", "duplicates", "non_dominated_fronts", "nsga2",
           "rank_and_crowding_survival"]
