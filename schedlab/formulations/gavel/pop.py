"""POP for the Gavel allocation policies: k random sub-problems, solved apart, concatenated.

POP (Narayanan et al., SOSP 2021, "Solving Large-Scale Granular Resource Allocation Problems
Efficiently with POP") splits the jobs of a Gavel LP into k random parts J_1 .. J_k, gives
each part about 1/k of every accelerator type, solves the k sub-LPs independently (in
parallel) and concatenates their allocations:

    X[j, .] = X^(i)[j, .]   for j in J_i,      Y[p, .] = Y^(i)[p, .]   for p within J_i.

**Feasibility for the whole problem.** Every row of a Gavel LP is either per job (``job_share``,
``fairness``, ...) -- it holds in the part the job was solved in -- or a capacity row
sum_j s_j X[j,k] + sum_p g_p Y[p,k] <= n_k, which sums over the parts: part i uses at most its
n_k^(i) GPUs and sum_i n_k^(i) = n_k.  So the concatenation is feasible for the full LP.

**Not optimal.** It is the optimum of a *restricted* problem (each part confined to its own
slice of the cluster; pairs across parts never co-located), so its objective is a lower bound
of a maximization's optimum and no proof of optimality: the status is at best ``feasible``,
``bound`` and ``gap`` are left empty, and the ratio to the exact optimum is recorded only when
the caller ran the exact solve (``exact_objective``).  With k = 1 the one part *is* the full
problem, so its status, bound and gap are kept.

Choices (docs/pop.md):

* **Partition** (``partition=``): ``random`` (the default, POP's): a random permutation of
  the jobs (numpy ``default_rng(seed)``), cut into k consecutive blocks of sizes floor(J/k) or
  ceil(J/k) (Gavel's POP experiments assign jobs round-robin or uniformly at random; balanced
  random blocks keep every part non-empty).  ``balanced``: POP's "power-of-two choices"
  partition (:func:`balanced_partition`): the jobs, in instance order and in rounds of k (one
  job per part per round), each go to the better of two distinct random parts still open in
  the round, the one whose mean job moves closer to the whole population's mean job; a job is
  described by its scale factor, weight and throughput on each type, each dimension divided
  by its population mean.  Part sizes are floor(J/k) or ceil(J/k) too.  ``stratified``
  (:func:`stratified_partition`, ours, not POP's): the jobs are grouped into strata of jobs
  the LP cannot tell apart (:func:`job_strata`: same scale factor, weight, throughput row and
  job type) and each stratum is dealt round-robin over the parts, one rotation continuing
  across the strata, so every part is as close to a 1/k replica of the whole as integers
  allow.  When k divides every stratum's size (and every GPU count) each part's LP is the
  full LP scaled by 1/k and has the same optimum, so POP is then exact for max-min fairness
  (docs/pop.md derives it).
* **Space sharing**: a co-located pair is kept only when both of its jobs fall in the same
  part -- that is what POP does; about 1/k of the pairs survive.
* **Sub-cluster**: the schema's GPU counts are integers, so n_k GPUs of type k are
  apportioned: every part gets floor(n_k/k), and the n_k mod k remaining GPUs go one each to
  the next parts in a round-robin that continues across types (so the parts' totals differ by
  at most one GPU).  When k divides n_k this is exactly n_k/k.  Node lists are dropped (Gavel's
  LPs read only the per-type counts).
* **Objective**: recomputed on the *full* instance by the formulation's own
  :meth:`~schedlab.formulations.gavel.base.GavelMethod.objective_of` (e.g. for max-min
  fairness the minimum over all J jobs of s_j thr_j / (w_j T_eq[j]) with the full cluster's
  T_eq), so it is directly comparable with the exact optimum.  Only the pairs that received a
  share are read back (the full pair list can hold millions).
* **Rounds**: the sub-solves produce none; the round mechanism runs once on the concatenated
  allocation over the full cluster.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from schedlab.check import check
from schedlab.errors import InputError
from schedlab.formulations.gavel.base import GavelMethod
from schedlab.formulations.gavel.data import (
    allocation_arrays,
    effective_throughput,
    gavel_data,
    normalized_throughput,
)
from schedlab.instance import AcceleratorPool, Cluster, Instance, Job
from schedlab.registry import get_formulation
from schedlab.solution import InstanceRef, PairShare, Solution, Status, Timings, worst_status
from schedlab.solvers import SolverOptions

log = logging.getLogger(__name__)

PopBackend = Literal["local", "ray"]
PopPartition = Literal["random", "balanced", "stratified"]
#: The partitions :func:`pop_partition` knows, in the order the CLI lists them.
POP_PARTITIONS: tuple[PopPartition, ...] = ("random", "balanced", "stratified")


@dataclass(frozen=True)
class PopPart:
    """One sub-problem: its job ids (instance order), its GPUs per type and its instance."""

    job_ids: list[str]
    gpus: dict[str, int]
    instance: Instance


# ------------------------------------------------------------------------------- partition


def pop_partition(instance: Instance, k: int, seed: int,
                  partition: PopPartition = "random") -> list[list[str]]:
    """The k parts of ``instance``'s jobs, each listed in instance order, of sizes floor(J/k)
    or ceil(J/k).  ``random``: a seeded random permutation cut into k blocks; ``balanced``:
    :func:`balanced_partition` of :func:`job_dimensions`; ``stratified``:
    :func:`stratified_partition` of :func:`job_strata`.  :class:`InputError` unless
    1 <= k <= J and ``partition`` is one of :data:`POP_PARTITIONS`."""
    num_jobs = len(instance.jobs)
    if k < 1 or k > num_jobs:
        raise InputError(f"the number of partitions must be between 1 and the number of jobs "
                         f"({num_jobs}); got {k}", field="--partitions")
    ids = [job.id for job in instance.jobs]
    if partition == "random":
        order = np.random.default_rng(seed).permutation(num_jobs)
        blocks = np.array_split(order, k)
    elif partition == "balanced":
        blocks = balanced_partition(job_dimensions(instance), k, seed)
    elif partition == "stratified":
        blocks = stratified_partition(job_strata(instance), k, seed)
    else:
        raise InputError(f"unknown POP partition {partition!r} "
                         f"({', '.join(POP_PARTITIONS)})", field="--pop-partition")
    return [[ids[j] for j in np.sort(block)] for block in blocks]


def job_dimensions(instance: Instance) -> np.ndarray:
    """The (J, 2 + K) matrix the balanced partition balances: per job its scale factor s_j,
    its weight w_j and its throughput T[j, k] (steps/s on s_j GPUs) on each of the cluster's K
    accelerator types (0 where it has none), in instance order."""
    types = list(instance.cluster.accelerators)
    return np.array([[float(job.scale_factor), float(job.weight),
                      *(float(job.throughput.get(acc, 0.0)) for acc in types)]
                     for job in instance.jobs], dtype=float).reshape(len(instance.jobs),
                                                                     2 + len(types))


def balanced_partition(dims: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
    """POP's "power-of-two choices" partition of the rows of ``dims`` (J entities x D
    dimensions) into k parts of sizes floor(J/k) or ceil(J/k); the parts' row indices.

    Every dimension d with a positive population mean m_d is scaled to z[j, d] = dims[j, d] /
    m_d (a dimension whose mean is 0 is dropped: all its values are 0), so the population's
    mean is the all-ones vector 1 and a part P is as far from it as

        dist(P) = || (1/|P|) sum_{j in P} z[j] - 1 ||_2,     dist(empty part) = || 0 - 1 ||_2,

    the 2-norm of the relative deviations of the part's means (POP's ``means`` metric).
    The rows are taken in order, in rounds of k: in each round every part receives one row.
    Row j draws two distinct parts at random among those not yet served in its round and
    joins the one whose distance shrinks more, dist(P) - dist(P + j) (ties: the first drawn);
    the last row of a round joins the one part left.  So every part ends with floor(J/k) or
    ceil(J/k) rows.  (POP's own code draws among all k parts and only skips a drawn part that
    holds more than (J+1)/k entities.  On Gavel's job mix at J = 2048, k = 8 the sizes then
    drift apart -- 33 to 369 rows with no cap at all -- and a cap at ceil(J/k) forces the
    last jobs into whichever parts are left, which undoes the balance: the worst part's
    distance ended at 0.24-0.37 over seeds 0-3, vs 0.03-0.07 with rounds; docs/pop.md.)  Seeded by
    numpy ``default_rng(seed)``; the result depends only on ``dims``, k and ``seed``."""
    num_rows = dims.shape[0]
    means = dims.mean(axis=0) if num_rows else np.zeros(dims.shape[1])
    z = dims[:, means > 0] / means[means > 0]
    width = z.shape[1]
    target = np.ones(width)
    sums = np.zeros((k, width))
    sizes = np.zeros(k, dtype=int)
    members: list[list[int]] = [[] for _ in range(k)]
    rng = np.random.default_rng(seed)

    def distance(total: np.ndarray, count: int) -> float:
        mean = total / count if count else np.zeros(width)
        return float(np.linalg.norm(mean - target))

    for row in range(num_rows):
        open_parts = np.flatnonzero(sizes == row // k)  # not yet served in this round
        if open_parts.size == 1:
            choice = int(open_parts[0])
        else:
            drawn = rng.choice(open_parts, size=2, replace=False)
            gains = [distance(sums[i], sizes[i]) - distance(sums[i] + z[row], sizes[i] + 1)
                     for i in drawn]
            choice = int(drawn[1] if gains[1] > gains[0] else drawn[0])
        sums[choice] += z[row]
        sizes[choice] += 1
        members[choice].append(row)
    return [np.array(rows, dtype=int) for rows in members]


def job_strata(instance: Instance) -> list[np.ndarray]:
    """The jobs of ``instance`` grouped into strata of interchangeable jobs, in the order the
    stratified partition deals them; each stratum the row indices (instance order) of its jobs.

    Two jobs share a stratum when they agree on everything a max-min fairness LP reads of
    them: scale factor s_j, weight w_j, throughput row T[j, .] on the cluster's types (each
    value rounded to 12 significant digits), job type (the generator's co-location
    throughputs are a function of the two jobs' types) and whether the job lists co-location
    partners at all.  The strata are sorted by scale factor, then by decreasing
    d_j = w_j T_eq[j] / max_k T[j, k] -- the GPUs (time-averaged) a job holds per unit of
    normalized throughput on its fastest type, T_eq[j] = sum_k T[j, k] n_k / N -- then by the
    key itself, so strata next to each other ask for similar resources."""
    types = instance.types
    counts = np.array([instance.cluster.accelerators[acc].count for acc in types], dtype=float)
    strata: dict[tuple[Any, ...], list[int]] = {}
    demand: dict[tuple[Any, ...], float] = {}
    for row, job in enumerate(instance.jobs):
        thr = np.array([float(job.throughput.get(acc, 0.0)) for acc in types])
        key = (int(job.scale_factor), float(job.weight), job.job_type or "",
               tuple(float(f"{value:.12g}") for value in thr), bool(job.colocated_throughput))
        if key not in strata:
            strata[key] = []
            teq = float(thr @ counts) / float(counts.sum()) if counts.sum() else 0.0
            best = float(thr.max()) if thr.size else 0.0
            demand[key] = job.weight * teq / best if best > 0 else 0.0
        strata[key].append(row)
    order = sorted(strata, key=lambda key: (key[0], -demand[key], key))
    return [np.array(strata[key], dtype=int) for key in order]


def stratified_partition(strata: Sequence[np.ndarray], k: int, seed: int) -> list[np.ndarray]:
    """Deal the members of each stratum round-robin into k parts; the parts' row indices.

    The strata are taken in the given order and one rotation runs through all of them: a
    stratum of m members gives its (seeded) shuffled members to parts c, c + 1, ... (mod k),
    where c continues from where the previous stratum stopped.  So every stratum is split as
    evenly as possible (each part receives floor(m/k) or ceil(m/k) of it), the part sizes
    differ by at most one, and the m mod k left-over members of consecutive strata land in
    consecutive parts.  ``seed`` (numpy ``default_rng``) shuffles each stratum and labels the
    parts (a random permutation of 0..k-1 is the rotation's order); with interchangeable
    members neither changes any part's optimum."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(k)
    members: list[list[int]] = [[] for _ in range(k)]
    cursor = 0
    for stratum in strata:
        for row in rng.permutation(np.asarray(stratum, dtype=int)).tolist():
            members[int(labels[cursor % k])].append(row)
            cursor += 1
    return [np.array(rows, dtype=int) for rows in members]


def split_gpus(counts: Mapping[str, int], k: int) -> list[dict[str, int]]:
    """Apportion each type's n_k GPUs over k parts: floor(n_k/k) each, the n_k mod k others
    one per part in a round-robin continued across types.  Sums back to ``counts`` exactly."""
    parts: list[dict[str, int]] = [{} for _ in range(k)]
    cursor = 0
    for acc, count in counts.items():
        base, extra = divmod(count, k)
        for i in range(k):
            parts[i][acc] = base
        for _ in range(extra):
            parts[cursor % k][acc] += 1
            cursor += 1
    return parts


def restrict_jobs(instance: Instance, job_ids: Sequence[str],
                  gpus: Mapping[str, int] | None = None) -> Instance:
    """``instance`` with only ``job_ids`` (kept in instance order), each job's co-located
    partners restricted to those jobs, no Titan merges, and ``gpus`` GPUs per type when given
    (node lists then dropped).  Built by copying, not re-validating: a subset of a valid
    instance with a valid cluster is valid."""
    keep = set(job_ids)
    jobs: list[Job] = []
    for job in instance.jobs:
        if job.id not in keep:
            continue
        if job.colocated_throughput:
            partners = {other: by_acc for other, by_acc in job.colocated_throughput.items()
                        if other in keep}
            job = job.model_copy(update={"colocated_throughput": partners or None})
        jobs.append(job)
    update: dict[str, Any] = {"jobs": jobs, "merges": None}
    if gpus is not None:
        pools = instance.cluster.accelerators
        update["cluster"] = Cluster(accelerators={
            acc: AcceleratorPool(count=gpus[acc], cost_per_hour=pools[acc].cost_per_hour)
            for acc in pools
        })
    return instance.model_copy(update=update)


def pop_parts(instance: Instance, k: int, seed: int,
              partition: PopPartition = "random") -> list[PopPart]:
    """The k sub-problems of :func:`pop_partition` with the GPUs of :func:`split_gpus`."""
    blocks = pop_partition(instance, k, seed, partition)
    counts = {acc: pool.count for acc, pool in instance.cluster.accelerators.items()}
    if k > sum(counts.values()):
        raise InputError(f"the number of partitions ({k}) exceeds the number of GPUs "
                         f"({sum(counts.values())}): a part would have none",
                         field="--partitions")
    gpus = split_gpus(counts, k)
    if k == 1:
        return [PopPart(blocks[0], gpus[0], instance)]
    return [PopPart(block, share, restrict_jobs(instance, block, share))
            for block, share in zip(blocks, gpus, strict=True)]


# ------------------------------------------------------------------------------ sub-solves


def _solve_part(formulation_name: str, instance: Instance, options: SolverOptions,
                overrides: Mapping[str, Any]) -> tuple[Solution, float]:
    """Solve one part with the registered formulation, no rounds; (solution, wall s)."""
    start = time.perf_counter()
    form = get_formulation(formulation_name, **overrides)
    if hasattr(form, "num_rounds"):
        form.num_rounds = 0
    solution = form.solve(instance, options)
    return solution, time.perf_counter() - start


def _run_local(formulation_name: str, parts: Sequence[PopPart], options: SolverOptions,
               workers: int, overrides: Mapping[str, Any]) -> list[tuple[Solution, float]]:
    if workers <= 1 or len(parts) == 1:
        return [_solve_part(formulation_name, part.instance, options, overrides)
                for part in parts]
    with ProcessPoolExecutor(max_workers=min(workers, len(parts))) as pool:
        futures = [pool.submit(_solve_part, formulation_name, part.instance, options,
                               overrides) for part in parts]
        return [future.result() for future in futures]


def _run_ray(formulation_name: str, parts: Sequence[PopPart], options: SolverOptions,
             workers: int, overrides: Mapping[str, Any]) -> list[tuple[Solution, float]]:
    try:
        import ray
    except ImportError:
        raise InputError("the Ray backend needs Ray (pip install 'schedlab[dev]' or "
                         "'ray'); use --pop-backend local", field="--pop-backend") from None
    started = False
    if not ray.is_initialized():
        ray.init(num_cpus=max(workers, 1), include_dashboard=False, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(num_cpus=1)(_solve_part)
        refs = [remote.remote(formulation_name, part.instance, options, overrides)
                for part in parts]
        return list(ray.get(refs))
    finally:
        if started:
            ray.shutdown()


# -------------------------------------------------------------------------------- combine


def _used_pairs_instance(instance: Instance, colocated: Sequence[PairShare]) -> Instance:
    """``instance`` with each job's co-located partners cut down to the pairs in
    ``colocated`` (the objective and the rounds then never read the unused pairs)."""
    partners: dict[str, set[str]] = {}
    for share in colocated:
        a, b = share.jobs
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    jobs = []
    for job in instance.jobs:
        if job.colocated_throughput:
            used = partners.get(job.id, set())
            kept = {o: v for o, v in job.colocated_throughput.items() if o in used}
            job = job.model_copy(update={"colocated_throughput": kept or None})
        jobs.append(job)
    return instance.model_copy(update={"jobs": jobs})


def _combine(form: GavelMethod, instance: Instance, parts: Sequence[PopPart],
             results: Sequence[tuple[Solution, float]], num_rounds: int,
             partition: PopPartition) -> Solution:
    """The concatenated Solution (timings filled by the caller)."""
    subs = [solution for solution, _ in results]
    status = worst_status(*(s.status for s in subs))
    k = len(parts)
    if k > 1 and status == Status.OPTIMAL:
        status = Status.FEASIBLE  # optimal per part is not optimal for the whole problem
    solution = Solution(instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
                        formulation=form.name, status=status,
                        solver=subs[0].solver if subs else "highs")
    for i, sub in enumerate(subs):
        solution.diagnostics.extend(f"POP part {i}: {d}" for d in sub.diagnostics)
    if k == 1:
        solution.bound, solution.gap = subs[0].bound, subs[0].gap
    else:
        solution.diagnostics.append(
            f"POP heuristic: {k} parts ({partition} partition) solved apart; the objective "
            "is a feasible value of the full problem, not a proven optimum")
    if not status.has_solution:
        return solution
    for sub in subs:
        solution.allocation.update(sub.allocation)
        solution.colocated_allocation.extend(sub.colocated_allocation)
    reduced = _used_pairs_instance(instance, solution.colocated_allocation)
    solution.objective = form.objective_of(reduced, solution)
    data = gavel_data(reduced, space_sharing=bool(solution.colocated_allocation))
    x, y = allocation_arrays(data, solution.allocation, solution.colocated_allocation)
    solution.metrics["effective_throughput"] = dict(
        zip(data.job_ids, effective_throughput(data, x, y).tolist(), strict=True))
    solution.metrics["normalized_throughput"] = dict(
        zip(data.job_ids, normalized_throughput(data, x, y).tolist(), strict=True))
    if num_rounds > 0:
        from schedlab.formulations.gavel.rounds import schedule_rounds

        solution.rounds = schedule_rounds(reduced, solution.allocation, num_rounds,
                                          colocated=solution.colocated_allocation)
    return solution


def solve_pop(
    instance: Instance,
    formulation_name: str,
    k: int,
    *,
    seed: int = 0,
    partition: PopPartition = "random",
    workers: int | None = None,
    backend: PopBackend = "local",
    options: SolverOptions | None = None,
    num_rounds: int | None = None,
    exact_objective: float | None = None,
    run_check: bool = True,
    overrides: Mapping[str, Any] | None = None,
) -> Solution:
    """POP with ``k`` parts (module docstring) of the registered Gavel policy
    ``formulation_name``; the concatenated, checked Solution.

    ``partition``: ``random`` (default), ``balanced`` (:func:`balanced_partition`) or
    ``stratified`` (:func:`stratified_partition`), each seeded by ``seed``.  ``workers``:
    parallel sub-solves (default min(k, CPUs)); 1 solves the parts one after another in this
    process.  ``backend``: ``local`` (a process pool) or ``ray`` (a local Ray instance of
    ``workers`` CPUs unless one is already running).  ``num_rounds`` overrides
    ``instance.params.num_rounds`` for the round mechanism run on the concatenation.
    ``exact_objective``: the exact solve's optimum, when the caller ran it; its ratio
    objective / exact lands in ``metrics["pop"]["ratio_to_exact"]``.  ``overrides``: keyword
    arguments of the formulation's constructor for the part solves (e.g. ``method="fast"``).

    ``metrics["pop"]`` records the parts (jobs, GPUs, pairs kept, status, objective, seconds)
    and ``critical_path_s``: setup plus the slowest part, the time with one worker per part.
    """
    part_overrides = dict(overrides or {})
    form = get_formulation(formulation_name, **part_overrides)
    if not isinstance(form, GavelMethod):
        raise InputError(f"POP partitions Gavel allocation policies only; "
                         f"{formulation_name} is not one", field="--formulation")
    if backend not in ("local", "ray"):
        raise InputError(f"unknown POP backend {backend!r} (local or ray)",
                         field="--pop-backend")
    if workers is not None and workers < 1:
        raise InputError(f"workers must be >= 1 (got {workers})", field="--workers")
    opts = options or SolverOptions()
    rounds = instance.params.num_rounds if num_rounds is None else num_rounds

    start = time.perf_counter()
    parts = pop_parts(instance, k, seed, partition)
    setup_s = time.perf_counter() - start
    width = workers if workers is not None else min(k, os.cpu_count() or 1)
    start = time.perf_counter()
    run = _run_ray if backend == "ray" else _run_local
    results = run(formulation_name, parts, opts, width, part_overrides)
    solve_s = time.perf_counter() - start
    start = time.perf_counter()
    solution = _combine(form, instance, parts, results, rounds, partition)
    combine_s = time.perf_counter() - start
    solution.timings = Timings(build_s=setup_s, solve_s=solve_s, extract_s=combine_s)

    pairs_total = sum(len(job.colocated_throughput or {}) for job in instance.jobs) // 2
    pop: dict[str, Any] = {
        "partitions": k, "partition": partition, "seed": seed, "backend": backend, "workers": width,
        "jobs": [len(part.job_ids) for part in parts],
        "gpus": [part.gpus for part in parts],
        "pairs_total": pairs_total,
        "pairs_kept": sum(sum(len(job.colocated_throughput or {})
                              for job in part.instance.jobs) // 2 for part in parts),
        "status": [sub.status.value for sub, _ in results],
        "objective": [sub.objective for sub, _ in results],
        "seconds": [seconds for _, seconds in results],
        "critical_path_s": setup_s + max(seconds for _, seconds in results) + combine_s,
    }
    if exact_objective is not None and solution.objective is not None and exact_objective:
        pop["exact_objective"] = exact_objective
        pop["ratio_to_exact"] = solution.objective / exact_objective
    solution.metrics["pop"] = pop
    if run_check and solution.status.has_solution:
        start = time.perf_counter()
        solution.violations = check(instance, solution)
        solution.timings.check_s = time.perf_counter() - start
        for violation in solution.violations:
            log.error("checker: %s", violation)
    return solution
