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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from schedlab.formulations.arrays import add_expressions, add_rows
from schedlab.formulations.base import Formulation, Method, ObjectiveSense
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
from schedlab.lazy import LazyModule
from schedlab.solution import InstanceRef, Solution, Status
from schedlab.solvers import SolveResult, SolverOptions
from schedlab.workloads.gavel import generate_gavel_instance

if TYPE_CHECKING:
    import pyomo.environ as pyo
    import scipy.sparse as sp
else:  # imported at the first use (schedlab.lazy)
    pyo = LazyModule("pyomo.environ")
    sp = LazyModule("scipy.sparse")


log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class GavelRows:
    """The shared rows as sparse matrices over the model's columns [X[j,k] for (j,k) in JK
    order, then Y[p,k] for (p,k) in PK order] (:func:`model_columns`).

    ``share`` (J rows): the ``job_share`` left-hand sides; ``gpus`` (K rows): the
    ``capacity`` left-hand sides; ``thr`` (J rows): the ``thr`` expressions, steps/s.
    """

    jk: IntArray  # (n_x, 2) (job, type) of each X column
    pk: IntArray  # (n_y, 2) (pair, type) of each Y column
    share: sp.csr_matrix
    gpus: sp.csr_matrix
    thr: sp.csr_matrix

    @property
    def width(self) -> int:
        """Columns: n_x + n_y."""
        return len(self.jk) + len(self.pk)


def gavel_rows(data: GavelData) -> GavelRows:
    """:class:`GavelRows` of ``data`` (module docstring for the rows), built in numpy."""
    num_jobs, num_types = data.throughput.shape
    jk = np.argwhere(data.allowed).astype(np.int64).reshape(-1, 2)
    pk = np.argwhere(data.pair_allowed).astype(np.int64).reshape(-1, 2)
    x_col = np.arange(len(jk))
    y_col = len(jk) + np.arange(len(pk))
    pairs = np.asarray(data.pairs, dtype=np.int64).reshape(-1, 2)
    first, second = pairs[pk[:, 0], 0], pairs[pk[:, 0], 1]
    width = len(jk) + len(pk)

    def matrix(height: int, *parts: tuple[FloatArray, IntArray, IntArray]) -> sp.csr_matrix:
        values = np.concatenate([np.asarray(v, dtype=float) for v, _, _ in parts])
        rows = np.concatenate([r for _, r, _ in parts])
        cols = np.concatenate([c for _, _, c in parts])
        out = sp.csr_matrix((values, (rows, cols)), shape=(height, width))
        out.eliminate_zeros()  # a 0 * Y term is no term (as in Pyomo's algebra)
        out.sort_indices()
        return out

    pair_thr = data.pair_throughput[pk[:, 0], pk[:, 1]] if len(pk) else np.zeros((0, 2))
    share = matrix(num_jobs, (np.ones(len(jk)), jk[:, 0], x_col),
                   (np.ones(len(pk)), first, y_col), (np.ones(len(pk)), second, y_col))
    gpus = matrix(num_types, (data.scale_factor[jk[:, 0]], jk[:, 1], x_col),
                  (data.pair_scale_factor[pk[:, 0]] if len(pk) else np.zeros(0), pk[:, 1], y_col))
    thr = matrix(num_jobs, (data.throughput[jk[:, 0], jk[:, 1]], jk[:, 0], x_col),
                 (pair_thr[:, 0], first, y_col), (pair_thr[:, 1], second, y_col))
    return GavelRows(jk=jk, pk=pk, share=share, gpus=gpus, thr=thr)


def model_columns(m: pyo.ConcreteModel) -> list[Any]:
    """The variables of :class:`GavelRows`' columns: X in JK order, then Y in PK order."""
    return [*m.X.values(), *m.Y.values()]


def base_model(data: GavelData, name: str, *, type_blind: bool = False) -> pyo.ConcreteModel:
    """Variables X (and Y), ``job_share`` and ``capacity`` rows, and ``thr`` expressions;
    with ``type_blind`` also the heterogeneity-agnostic rows ``type_blind[j,k]``.  Built from
    the arrays of :func:`gavel_rows` (kept as ``m.gavel_rows`` for the policies' rows); a row
    without terms is skipped."""
    m = pyo.ConcreteModel(name=name)
    num_jobs, num_types = data.throughput.shape
    rows = gavel_rows(data)
    m.J = pyo.Set(initialize=range(num_jobs), ordered=True)
    m.K = pyo.Set(initialize=range(num_types), ordered=True)
    m.JK = pyo.Set(initialize=[tuple(key) for key in rows.jk.tolist()], dimen=2, ordered=True)
    m.X = pyo.Var(m.JK, bounds=(0.0, 1.0))
    m.PK = pyo.Set(initialize=[tuple(key) for key in rows.pk.tolist()], dimen=2, ordered=True)
    m.Y = pyo.Var(m.PK, bounds=(0.0, 1.0))
    m.gavel_rows = rows
    columns = model_columns(m)
    add_rows(m, "job_share", rows.share, columns, None, 1.0, index=m.J)
    add_rows(m, "capacity", rows.gpus, columns, None, data.gpus, index=m.K)
    add_expressions(m, "thr", rows.thr, columns, index=m.J)
    if type_blind:
        # X[j,k] - (n_k / N_j) x_total[j] = 0 over the columns [X..., x_total...]
        pool = (data.allowed * data.gpus[None, :]).sum(axis=1)
        m.x_total = pyo.Var(m.J, bounds=(0.0, 1.0))
        n_x = len(rows.jk)
        ratio = data.gpus[rows.jk[:, 1]] / pool[rows.jk[:, 0]]
        blind = sp.csr_matrix(
            (np.concatenate([np.ones(n_x), -ratio]),
             (np.tile(np.arange(n_x), 2), np.concatenate([np.arange(n_x), n_x + rows.jk[:, 0]]))),
            shape=(n_x, n_x + num_jobs))
        blind.sort_indices()
        add_rows(m, "type_blind", blind, [*m.X.values(), *m.x_total.values()], 0.0, 0.0,
                 index=m.JK)
    return m


def lead_rows(m: pyo.ConcreteModel, jobs: npt.ArrayLike, thr_coefs: npt.ArrayLike,
              lead_coefs: npt.ArrayLike) -> sp.csr_matrix:
    """Rows ``lead_coefs[i] v - thr_coefs[i] thr[jobs[i]]`` over the columns [v, X..., Y...]
    of a :func:`base_model`: Pyomo's own form of the per-job row
    ``thr_coefs[i] thr[jobs[i]] >= lead_coefs[i] v`` (v one variable, such as t), to be
    bounded above by 0."""
    thr = m.gavel_rows.thr[np.asarray(jobs, dtype=np.int64)]
    lead = sp.csr_matrix(np.asarray(lead_coefs, dtype=float).reshape(-1, 1))
    out = sp.hstack([lead, -sp.diags(np.asarray(thr_coefs, dtype=float)) @ thr], format="csr")
    out.sort_indices()
    return out


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


class GavelMethod(Method):
    """Common parts of every Gavel method, model or not: data, variants, the objective in
    numpy, extraction of an allocation into a Solution, metrics and rounds."""

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

    def precheck(self, instance: Instance) -> Solution | None:
        """Validate; an ``infeasible`` Solution naming a job that can run nowhere, if any."""
        self.validate(instance)
        if self.needs_every_job:
            stuck = unrunnable_jobs(self.true_data(instance))
            if stuck:
                return self.infeasible_solution(instance, unrunnable_reason(instance, stuck))
        return None

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
        solution.metrics["effective_throughput"] = dict(
            zip(true.job_ids, thr.tolist(), strict=True))
        solution.metrics["normalized_throughput"] = dict(
            zip(true.job_ids, normalized_throughput(true, x, y).tolist(), strict=True))
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


class GavelPolicy(GavelMethod, Formulation):
    """A Gavel policy written as an LP over the shared model of :func:`base_model`."""

    default_lp_method = "simplex"

    def model(self, data: GavelData, name: str | None = None) -> pyo.ConcreteModel:
        """:func:`base_model` for this variant."""
        return base_model(data, name or self.name, type_blind=not self.heterogeneity_aware)

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

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        return self.precheck(instance) or super().solve(instance, options)
