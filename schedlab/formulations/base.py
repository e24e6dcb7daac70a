"""The contracts behind every registered name: Instance in, Solution out.

* :class:`Method` -- what the registry holds: ``solve(instance, options) -> Solution``, with
  ``validate``, ``objective_of`` (the objective re-derived in numpy, for the checker) and
  ``example_instance`` (for :mod:`schedlab.testing`).
* :class:`Formulation` -- a method that builds optimization models: ``build`` a Pyomo model
  from an Instance, ``extract`` a Solution; ``solve`` = build -> :meth:`Formulation.extend_model`
  -> solver -> extract, timed per phase.  Iterative methods (bisection, water-filling,
  decompositions) override ``solve`` and reuse one :class:`~schedlab.solvers.PersistentSolver`
  instead of rebuilding; every model they hand to a solver goes through ``extend_model`` first,
  so a user's extra constraints (:meth:`Formulation.extend`) reach every sub-solve.
* :class:`Heuristic` -- a method without a model (a list scheduler, a greedy rule): it
  implements ``run``; its status is ``feasible`` whatever it returns (a heuristic proves no
  optimum) and its solver is ``"none"``.
"""

from __future__ import annotations

import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from schedlab.errors import InputError
from schedlab.instance import Instance
from schedlab.solution import InstanceRef, Solution, Status, Timings, settle_status
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions

if TYPE_CHECKING:  # pyomo is imported by the formulations themselves, when one is built
    import pyomo.environ as pyo

#: Direction of a formulation's objective.
ObjectiveSense = Literal["minimize", "maximize"]

#: A user's addition to a model: called with the built model and the instance, it adds
#: components (constraints, variables) in place.
ModelExtension = Callable[[Any, Instance], None]  # (pyomo ConcreteModel, Instance)

_F = TypeVar("_F", bound="Formulation")


class Method(ABC):
    """Anything registered under a formulation name.  Subclasses set ``name`` and
    ``description`` and implement :meth:`solve`."""

    name: str = ""
    description: ClassVar[str] = ""
    #: Direction of ``objective``: with ``maximize`` a valid ``bound`` is >= the objective,
    #: with ``minimize`` <= (None: not declared; schedlab.testing then refuses a bound).
    objective_sense: ClassVar[ObjectiveSense | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Every ``solve`` a subclass defines ends with :func:`~schedlab.solution.settle_status`:
        the one place the status rule is applied, whatever path the method took."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("solve")
        if own is not None and not getattr(own, "_settles_status", False):
            cls.solve = _settling(own)  # type: ignore[method-assign]

    @abstractmethod
    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """The Solution of ``instance`` (status, objective, bound, allocation or schedule)."""

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

    # ------------------------------------------------------------------ helpers
    def infeasible_solution(self, instance: Instance, reason: str) -> Solution:
        """A Solution with status infeasible and the reason in its diagnostics."""
        return Solution(
            instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
            formulation=self.name,
            status=Status.INFEASIBLE,
            diagnostics=[reason],
        )


def _settling(solve: Callable[..., Solution]) -> Callable[..., Solution]:
    """``solve`` followed by the status rule (:func:`~schedlab.solution.settle_status`)."""

    @functools.wraps(solve)
    def settled(self: Method, instance: Instance, options: SolverOptions | None = None,
                *args: object, **kwargs: object) -> Solution:
        return settle_status(solve(self, instance, options, *args, **kwargs))

    settled._settles_status = True  # type: ignore[attr-defined]
    return settled


class Formulation(Method):
    """A method that builds optimization models (see the module docstring)."""

    #: LP method used when the caller leaves it on ``auto``.
    default_lp_method: ClassVar[str] = "simplex"
    #: False where the method's sub-models cannot carry a user's constraints; then
    #: :meth:`extend` refuses with a clear error instead of ignoring them.
    accepts_extensions: ClassVar[bool] = True

    @abstractmethod
    def build(self, instance: Instance) -> pyo.ConcreteModel:
        """Return the Pyomo model (users may add constraints before solving)."""

    @abstractmethod
    def extract(
        self, model: pyo.ConcreteModel, instance: Instance, result: SolveResult
    ) -> Solution:
        """Read the solved model into a Solution (status, objective, allocation, ...)."""

    #: The user's model extensions, applied in order by :meth:`extend_model` (set on the
    #: instance by :meth:`extend`; the class default is none).
    extensions: tuple[ModelExtension, ...] = ()

    # extensions ---------------------------------------------------------------------------

    def extend(self: _F, extension: ModelExtension) -> _F:
        """Add ``extension(model, instance)`` to every model this formulation solves (its
        constraints then hold in the Solution); returns ``self`` for chaining.  Refused with
        an :class:`~schedlab.errors.InputError` where the method cannot carry them."""
        if not self.accepts_extensions:
            raise InputError(
                f"formulation {self.name or type(self).__name__} does not take extra "
                "constraints: its sub-models are not the model build() returns",
                field="extend")
        self.extensions = (*self.extensions, extension)
        return self

    def extend_model(self, model: pyo.ConcreteModel, instance: Instance) -> pyo.ConcreteModel:
        """The hook every solve path calls on each model before handing it to a solver:
        applies the user's extensions in order; returns the model."""
        for extension in self.extensions:
            extension(model, instance)
        return model

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """Build, solve and extract, timing each phase."""
        opts = (options or SolverOptions()).with_method(self.default_lp_method)  # type: ignore[arg-type]
        self.validate(instance)
        t0 = time.perf_counter()
        model = self.extend_model(self.build(instance), instance)
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


class Heuristic(Method):
    """A method without a model: :meth:`run` computes the answer; :meth:`solve` validates,
    times it and makes the status honest (a heuristic proves nothing: ``optimal`` becomes
    ``feasible``, no bound or gap is kept unless ``run`` computed a valid bound itself)."""

    @abstractmethod
    def run(self, instance: Instance) -> Solution:
        """The heuristic's Solution of ``instance`` (validated)."""

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """Validate, run and time; the status is never ``optimal``."""
        self.validate(instance)
        t0 = time.perf_counter()
        solution = self.run(instance)
        if solution.status == Status.OPTIMAL:
            solution.status = Status.FEASIBLE
        solution.solver = "none"
        solution.timings = Timings(solve_s=time.perf_counter() - t0)
        return solution
