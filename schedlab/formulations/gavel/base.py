"""The parts every Gavel policy shares: the LP skeleton (:func:`base_model`), reading an
allocation back, jobs that can run nowhere, and the :class:`GavelPolicy` base class.

Variables (docs/formulations/gavel.md): X[j,k] in [0,1], the share of wall-clock time job j runs on
accelerator type k; with space sharing also Y[p,k] in [0,1] for co-located pairs p.

Constraints shared by every policy (``base_model``):

* ``job_share[j]``:  sum_k X[j,k] + sum_{p containing j} sum_k Y[p,k] <= 1
* ``capacity[k]``:   sum_j s_j X[j,k] + sum_p max(s_a, s_b) Y[p,k] <= n_k
* ``thr[j]`` (expression): sum_k T[j,k] X[j,k] + sum_p Tc[p,k,j] Y[p,k]   (steps/s)

Every policy has a heterogeneity-agnostic variant (``heterogeneity_aware=False``): a policy
that cannot tell accelerator types apart decides only each job's total time share x_j and
its time lands on the types in proportion to their GPU counts, the expectation of a
type-blind placement:

* ``type_blind[j,k]``:  X[j,k] = x_j n_k / N_j,   N_j = sum of n_k over the types j may use.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections import defaultdict
from typing import Any, ClassVar

import numpy as np
import pyomo.environ as pyo

from schedlab.formulations.base import Formulation, ObjectiveSense
from schedlab.formulations.gavel.data import (
    FloatArray,
    GavelData,
    allocation_arrays,
    allocation_dicts,
    effective_throughput,
    gavel_data,
    normalized_throughput,
)
from schedlab.instance import Instance
from schedlab.solution import InstanceRef, Solution, Status
from schedlab.solvers import SolveResult, SolverOptions
from schedlab.workloads.gavel import generate_gavel_instance

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- model


def base_model(data: GavelData, name: str, *, type_blind: bool = False) -> pyo.ConcreteModel:
    """Variables X (and Y), ``job_share`` and ``capacity`` rows, and ``thr`` expressions;
    with ``type_blind`` also the heterogeneity-agnostic rows ``type_blind[j,k]``."""
    m = pyo.ConcreteModel(name=name)
    num_jobs, num_types = data.throughput.shape
    m.J = pyo.Set(initialize=range(num_jobs), ordered=True)
    m.K = pyo.Set(initialize=range(num_types), ordered=True)
    jk = [(int(j), int(k)) for j, k in zip(*np.nonzero(data.allowed), strict=True)]
    m.JK = pyo.Set(initialize=jk, dimen=2, ordered=True)
    m.X = pyo.Var(m.JK, bounds=(0.0, 1.0))
    pk = [(int(p), int(k)) for p, k in zip(*np.nonzero(data.pair_allowed), strict=True)]
    m.PK = pyo.Set(initialize=pk, dimen=2, ordered=True)
    m.Y = pyo.Var(m.PK, bounds=(0.0, 1.0))

    share_terms: dict[int, list[Any]] = defaultdict(list)
    gpu_terms: dict[int, list[Any]] = defaultdict(list)
    thr_terms: dict[int, list[Any]] = defaultdict(list)
    for j, k in jk:
        x = m.X[j, k]
        share_terms[j].append(x)
        gpu_terms[k].append(data.scale_factor[j] * x)
        thr_terms[j].append(data.throughput[j, k] * x)
    pair_gpus = data.pair_scale_factor
    for p, k in pk:
        y = m.Y[p, k]
        a, b = data.pairs[p]
        share_terms[a].append(y)
        share_terms[b].append(y)
        gpu_terms[k].append(pair_gpus[p] * y)
        thr_terms[a].append(data.pair_throughput[p, k, 0] * y)
        thr_terms[b].append(data.pair_throughput[p, k, 1] * y)

    def job_share(model: pyo.ConcreteModel, j: int) -> Any:
        terms = share_terms.get(j)
        return pyo.quicksum(terms) <= 1.0 if terms else pyo.Constraint.Skip

    def capacity(model: pyo.ConcreteModel, k: int) -> Any:
        terms = gpu_terms.get(k)
        return pyo.quicksum(terms) <= float(data.gpus[k]) if terms else pyo.Constraint.Skip

    m.job_share = pyo.Constraint(m.J, rule=job_share)
    m.capacity = pyo.Constraint(m.K, rule=capacity)
    m.thr = pyo.Expression(m.J, rule=lambda model, j: pyo.quicksum(thr_terms.get(j, [])))
    if type_blind:
        pool = (data.allowed * data.gpus[None, :]).sum(axis=1)
        m.x_total = pyo.Var(m.J, bounds=(0.0, 1.0))
        m.type_blind = pyo.Constraint(
            m.JK,
            rule=lambda model, j, k: model.X[j, k]
            == float(data.gpus[k] / pool[j]) * model.x_total[j],
        )
    return m


def read_allocation(m: pyo.ConcreteModel, data: GavelData) -> tuple[FloatArray, FloatArray]:
    """(X, Y) arrays from a solved model (zeros where a variable has no value)."""
    x = np.zeros(data.throughput.shape)
    for (j, k), value in m.X.extract_values().items():
        x[j, k] = value or 0.0
    y = np.zeros(data.pair_allowed.shape)
    for (p, k), value in m.Y.extract_values().items():
        y[p, k] = value or 0.0
    return x, y


def unrunnable_jobs(data: GavelData) -> list[str]:
    """Jobs that fit on no accelerator pool (scale factor too large or no throughput)."""
    can_run = np.asarray(data.allowed.any(axis=1), dtype=bool)
    if data.pairs:
        idx = np.asarray(data.pairs, dtype=np.int64)[data.pair_allowed.any(axis=1)]
        can_run[idx.reshape(-1)] = True
    return [data.job_ids[j] for j in np.flatnonzero(~can_run)]


def unrunnable_reason(instance: Instance, job_ids: list[str]) -> str:
    """One line naming the first job that can run nowhere, with its scale factor and pools."""
    pools = {k: p.count for k, p in instance.cluster.accelerators.items()}
    jobs = {job.id: job for job in instance.jobs}
    first = jobs[job_ids[0]]
    more = f" (and {len(job_ids) - 1} more job(s))" if len(job_ids) > 1 else ""
    return (
        f"job {first.id} cannot run anywhere: scale factor {first.scale_factor} with "
        f"throughput on {sorted(first.throughput)} but pools {pools}{more}"
    )


# ---------------------------------------------------------------------- the base class


class GavelPolicy(Formulation):
    """Common parts of the Gavel policies: data, variants, extraction and metrics."""

    default_lp_method = "simplex"
    objective_sense: ClassVar[ObjectiveSense | None] = "maximize"
    #: policies whose objective needs every job to make progress
    needs_every_job = True

    def __init__(
        self,
        heterogeneity_aware: bool = True,
        space_sharing: bool = False,
        num_rounds: int | None = None,
    ) -> None:
        self.heterogeneity_aware = heterogeneity_aware
        self.space_sharing = space_sharing
        self.num_rounds = num_rounds

    # data -----------------------------------------------------------------
    def true_data(self, instance: Instance) -> GavelData:
        """Arrays with the instance's measured throughputs."""
        return gavel_data(instance, space_sharing=self.space_sharing)

    def policy_data(self, instance: Instance) -> tuple[GavelData, GavelData]:
        """(data the policy optimizes over, true data): the same arrays for both variants;
        the agnostic variant differs by the ``type_blind`` rows of :func:`base_model`."""
        true = self.true_data(instance)
        return true, true

    def model(self, data: GavelData, name: str | None = None) -> pyo.ConcreteModel:
        """:func:`base_model` for this variant."""
        return base_model(data, name or self.name, type_blind=not self.heterogeneity_aware)

    def validate(self, instance: Instance) -> None:
        """Gavel policies need a throughput for every job (on at least one type)."""
        instance.require("throughput", formulation=self.name)
        if self.space_sharing and not any(job.colocated_throughput for job in instance.jobs):
            log.debug("%s: no job has colocated_throughput; nothing to pack", self.name)

    def example_instance(self) -> Instance:
        """Six Gavel-style jobs on 2 V100 + 2 P100 + 2 K80 GPUs (seed 0, every arrival at
        0 s, Gavel's scale-factor mix and measured throughputs, a price per GPU type for the
        cost variants) with what any Gavel variant reads: two entities (hierarchical), SLOs of
        4 to 8 times the job's duration (SLO variants) and, for space sharing, co-located
        throughputs of the 1-GPU pairs."""
        return generate_gavel_instance(
            6, {"v100": 2, "p100": 2, "k80": 2}, seed=0, entities=2, slo_factor=(4.0, 8.0),
            colocation=self.space_sharing, name=f"example-{self.name or 'gavel'}")

    # objective ------------------------------------------------------------
    @abstractmethod
    def objective_value(self, data: GavelData, x: FloatArray, y: FloatArray) -> float:
        """The policy's objective evaluated on an allocation (independent of the LP)."""

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """:meth:`objective_value` of the solution's allocation on the policy's data, as
        :meth:`finish` evaluates ``solution.objective``: X and Y read back from
        ``solution.allocation`` / ``colocated_allocation`` by :func:`allocation_arrays`.

        The objective is a function of the whole allocation (X, Y): co-located shares count
        whenever the solution holds some, also under a name whose variant does not pack (its
        own solutions have Y = 0, so nothing changes for them).  Shares naming a job or
        accelerator type the instance lacks are left out (the checker reports them on their
        own)."""
        data, _ = self.policy_data(instance)
        if solution.colocated_allocation and not data.pairs:
            data = gavel_data(instance, space_sharing=True)
        jobs, types = set(data.job_ids), set(data.types)
        allocation = {
            job: {acc: share for acc, share in shares.items() if acc in types}
            for job, shares in solution.allocation.items()
            if job in jobs
        }
        colocated = [p for p in solution.colocated_allocation if p.accelerator in types]
        x, y = allocation_arrays(data, allocation, colocated)
        return self.objective_value(data, x, y)

    # model ----------------------------------------------------------------
    def build(self, instance: Instance) -> pyo.ConcreteModel:
        data, _ = self.policy_data(instance)
        return self.build_from(data)

    @abstractmethod
    def build_from(self, data: GavelData) -> pyo.ConcreteModel:
        """The policy's model over ``data``."""

    def extract(
        self, model: pyo.ConcreteModel, instance: Instance, result: SolveResult
    ) -> Solution:
        data, true = self.policy_data(instance)
        solution = self.empty_solution(instance, result)
        if not result.status.has_solution:
            return solution
        x, y = read_allocation(model, data)
        return self.finish(solution, instance, data, true, x, y)

    def precheck(self, instance: Instance) -> Solution | None:
        """Validate; an ``infeasible`` Solution naming a job that can run nowhere, if any."""
        self.validate(instance)
        if self.needs_every_job:
            stuck = unrunnable_jobs(self.true_data(instance))
            if stuck:
                return self.infeasible_solution(instance, unrunnable_reason(instance, stuck))
        return None

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        return self.precheck(instance) or super().solve(instance, options)

    def finish(
        self,
        solution: Solution,
        instance: Instance,
        data: GavelData,
        true: GavelData,
        x: FloatArray,
        y: FloatArray,
    ) -> Solution:
        """Fill allocation, objective recomputed from it, metrics and rounds."""
        x = np.clip(x, 0.0, 1.0)
        y = np.clip(y, 0.0, 1.0)
        solution.allocation, solution.colocated_allocation = allocation_dicts(data, x, y)
        solution.objective = self.objective_value(data, x, y)
        thr = effective_throughput(true, x, y)
        solution.metrics["effective_throughput"] = {
            job: float(v) for job, v in zip(true.job_ids, thr, strict=True)
        }
        solution.metrics["normalized_throughput"] = {
            job: float(v)
            for job, v in zip(true.job_ids, normalized_throughput(true, x, y), strict=True)
        }
        solution.metrics["objective_true_throughput"] = self.objective_value(true, x, y)
        solution.metrics["heterogeneity_aware"] = self.heterogeneity_aware
        rounds = self.num_rounds if self.num_rounds is not None else instance.params.num_rounds
        if rounds > 0:
            from schedlab.formulations.gavel.rounds import schedule_rounds

            solution.rounds = schedule_rounds(
                instance, solution.allocation, rounds, colocated=solution.colocated_allocation
            )
        return solution

    def new_solution(self, instance: Instance, status: Status) -> Solution:
        """An empty Solution of this formulation with ``status``."""
        return Solution(
            instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
            formulation=self.name,
            status=status,
        )
