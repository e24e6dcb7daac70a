"""The formulation contract: ``build`` a Pyomo model from an Instance, ``extract`` a Solution.

``solve`` = build -> solver -> extract, timed per phase.  Iterative methods (bisection,
water-filling) override :meth:`Formulation.solve` and reuse one
:class:`~schedlab.solvers.PersistentSolver` instead of rebuilding the model.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import ClassVar, Literal

import pyomo.environ as pyo

from schedlab.instance import Instance
from schedlab.solution import InstanceRef, Solution, Status, Timings
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions

#: Direction of a formulation's objective.
ObjectiveSense = Literal["minimize", "maximize"]


class Formulation(ABC):
    """Base of every formulation.  Subclasses set ``name`` and ``description``."""

    name: str = ""
    description: ClassVar[str] = ""
    #: LP method used when the caller leaves it on ``auto``.
    default_lp_method: ClassVar[str] = "simplex"
    #: Direction of ``objective``: with ``maximize`` a valid ``bound`` is >= the objective,
    #: with ``minimize`` <= (None: not declared; schedlab.testing then refuses a bound).
    objective_sense: ClassVar[ObjectiveSense | None] = None

    @abstractmethod
    def build(self, instance: Instance) -> pyo.ConcreteModel:
        """Return the Pyomo model (users may add constraints before solving)."""

    @abstractmethod
    def extract(
        self, model: pyo.ConcreteModel, instance: Instance, result: SolveResult
    ) -> Solution:
        """Read the solved model into a Solution (status, objective, allocation, ...)."""

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """The objective of ``solution`` re-derived from ``instance`` and the solution's
        allocation / schedule alone (never its ``metrics``), in plain numpy; the same quantity
        the formulation reports as ``solution.objective``.  None: this formulation declares no
        objective (the checker then compares nothing)."""
        return None

    def example_instance(self) -> Instance:
        """A small instance this formulation solves in well under a second, from the
        project's seeded generators: the example :func:`schedlab.testing.check_formulation`
        runs the conformance checks on.  Every formulation family overrides it."""
        raise NotImplementedError(
            f"formulation {self.name or type(self).__name__} declares no example instance: "
            "override example_instance() to return a small Instance it solves")

    def validate(self, instance: Instance) -> None:  # noqa: B027 - optional hook
        """Raise :class:`~schedlab.errors.InputError` when the instance lacks a needed field."""

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """Build, solve and extract, timing each phase."""
        opts = (options or SolverOptions()).with_method(self.default_lp_method)  # type: ignore[arg-type]
        self.validate(instance)
        t0 = time.perf_counter()
        model = self.build(instance)
        t1 = time.perf_counter()
        result = PersistentSolver(opts).solve(model)
        t2 = time.perf_counter()
        solution = self.extract(model, instance, result)
        t3 = time.perf_counter()
        solution.solver = opts.solver
        solution.timings = Timings(build_s=t1 - t0, solve_s=t2 - t1, extract_s=t3 - t2)
        return solution

    # ------------------------------------------------------------------ helpers
    def empty_solution(self, instance: Instance, result: SolveResult) -> Solution:
        """A Solution carrying status, objective, bound and gap of ``result``, nothing else
        (plus ``metrics["gap_tolerance"]`` when the caller set a MIP gap)."""
        solution = Solution(
            instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
            formulation=self.name,
            status=result.status,
            objective=result.objective,
            bound=result.bound,
            gap=result.gap,
            diagnostics=[] if result.status.has_solution else [f"solver: {result.message}"],
        )
        if result.gap_tolerance is not None:
            solution.metrics["gap_tolerance"] = result.gap_tolerance
        return solution

    def infeasible_solution(self, instance: Instance, reason: str) -> Solution:
        """A Solution with status infeasible and the reason in its diagnostics."""
        return Solution(
            instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
            formulation=self.name,
            status=Status.INFEASIBLE,
            diagnostics=[reason],
        )
