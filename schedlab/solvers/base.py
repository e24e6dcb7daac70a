"""Solver options, results and the persistent solver wrapper (HiGHS default, Gurobi optional)."""

from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from schedlab.errors import SolverError, SolverUnavailableError, UnknownNameError
from schedlab.solution import Status

if TYPE_CHECKING:  # pyomo is loaded when a model is solved, not when schedlab is imported
    import pyomo.environ as pyo

log = logging.getLogger(__name__)

LpMethod = Literal["auto", "simplex", "ipm"]
KNOWN_SOLVERS = ("highs", "gurobi")


@dataclass(frozen=True)
class SolverOptions:
    """How to solve: which solver, limits and the LP method.

    ``lp_method``: ``simplex`` (dual simplex, best for small models and warm re-solves after
    adding rows), ``ipm`` (interior point with crossover, best for large degenerate LPs such as
    the fairness LPs), ``auto`` (the formulation or solver decides).
    """

    solver: str = "highs"
    time_limit_s: float | None = None
    mip_gap: float | None = None
    threads: int | None = None
    lp_method: LpMethod = "auto"
    seed: int | None = None
    verbose: bool = False
    warm_start: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def with_method(self, method: LpMethod) -> SolverOptions:
        """Copy with ``lp_method`` set, unless the user already chose one."""
        if self.lp_method != "auto":
            return self
        return replace(self, lp_method=method)


@dataclass
class SolveResult:
    """Outcome of one solve: status, objective (incumbent), best bound, relative gap, seconds."""

    status: Status
    objective: float | None
    bound: float | None
    gap: float | None
    solve_s: float
    message: str = ""
    termination: str = ""
    #: the relative MIP gap the solver was allowed to stop at (None: the solver's default)
    gap_tolerance: float | None = None


def available_solvers() -> dict[str, bool]:
    """Solver name -> whether it can be used here."""
    return {name: _is_available(name) for name in KNOWN_SOLVERS}


def _is_available(name: str) -> bool:
    try:
        return bool(_make(name).available())
    except SolverUnavailableError:
        return False


def _make(name: str) -> Any:
    if name == "highs":
        from schedlab.solvers.highs_warm import WarmStartHighs

        return WarmStartHighs()
    if name == "gurobi":
        try:
            import gurobipy  # noqa: F401
        except ImportError:
            raise SolverUnavailableError(
                "solver 'gurobi' is not installed (pip install 'schedlab[gurobi]')",
                field="--solver",
            ) from None
        from pyomo.contrib.solver.solvers.gurobi.gurobi_persistent import GurobiPersistent

        _quiet_gurobi_env_warning()
        return GurobiPersistent()
    raise UnknownNameError(
        f"unknown solver {name!r} (known: {', '.join(KNOWN_SOLVERS)})", field="--solver"
    )


class _DropEnvClientWarning(logging.Filter):
    """Pyomo 6.10 releases its shared Gurobi environment once per results object *and* per
    solver, then warns about "-1 remaining environment clients"; harmless, so hidden."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "remaining environment clients" not in record.getMessage()


def _quiet_gurobi_env_warning() -> None:
    target = logging.getLogger("pyomo.contrib.solver.solvers.gurobi.gurobi_direct_base")
    if not any(isinstance(f, _DropEnvClientWarning) for f in target.filters):
        target.addFilter(_DropEnvClientWarning())


def _solver_options(options: SolverOptions) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if options.solver == "highs":
        if options.lp_method == "simplex":
            extra["solver"] = "simplex"
        elif options.lp_method == "ipm":
            extra["solver"] = "ipm"
            extra["run_crossover"] = "on"
        if options.seed is not None:
            extra["random_seed"] = options.seed
    elif options.solver == "gurobi":
        if options.lp_method == "simplex":
            extra["Method"] = 1
        elif options.lp_method == "ipm":
            extra["Method"] = 2
        if options.seed is not None:
            extra["Seed"] = options.seed
    extra.update(options.extra)
    return extra


def _relative_gap(objective: float | None, bound: float | None) -> float | None:
    if objective is None or bound is None or not math.isfinite(bound):
        return None
    denom = max(abs(objective), 1e-10)
    return abs(bound - objective) / denom


def _is_licence_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "size-limited" in text or "license" in text or "licence" in text


class PersistentSolver:
    """A solver instance bound to one model, for repeated solves after small changes.

    The first :meth:`solve` loads the model into the solver; later calls push only what
    changed (bounds, fixed variables, mutable parameters, new or removed constraints).
    """

    def __init__(self, options: SolverOptions | None = None) -> None:
        self.options = options or SolverOptions()
        self._solver = _make(self.options.solver)
        if not self._solver.available():
            raise SolverUnavailableError(
                f"solver {self.options.solver!r} is installed but not usable here",
                field="--solver",
            )

    def solve(self, model: pyo.ConcreteModel, options: SolverOptions | None = None) -> SolveResult:
        """Solve ``model`` and load the values of its variables when a solution exists."""
        opts = options or self.options
        kwargs: dict[str, Any] = {
            "tee": sys.stderr if opts.verbose else False,  # the solver's log: a diagnostic
            "load_solutions": False,
            "raise_exception_on_nonoptimal_result": False,
            "solver_options": _solver_options(opts),
        }
        if opts.time_limit_s is not None:
            kwargs["time_limit"] = opts.time_limit_s
        if opts.mip_gap is not None:
            kwargs["rel_gap"] = opts.mip_gap
        if opts.threads is not None:
            kwargs["threads"] = opts.threads
        if opts.warm_start:
            if opts.solver == "gurobi":
                kwargs["warmstart_discrete_vars"] = True
            else:
                self._solver.warm_start = True
        start = time.perf_counter()
        try:
            results = self._solver.solve(model, **kwargs)
        except Exception as exc:  # solver plugins raise their own exception types
            if opts.solver == "gurobi" and _is_licence_error(exc):
                raise SolverUnavailableError(
                    "Gurobi's size-limited licence refuses this model (at most 2000 variables "
                    "and 2000 constraints without a licence file); use --solver highs or "
                    f"install a licence. Gurobi said: {exc}",
                    field="--solver",
                ) from None
            raise SolverError(f"solver {opts.solver!r} failed: {exc}") from exc
        elapsed = time.perf_counter() - start
        result = self._result(results, elapsed)
        result.gap_tolerance = opts.mip_gap
        return result

    def _result(self, results: Any, elapsed: float) -> SolveResult:
        """Status in the project's vocabulary; the gap is always computed from the solver's
        bound (an LP proven optimal has bound = objective by duality).  ``optimal`` means
        "proven within the allowed gap" (``gap_tolerance``), which the gap shows."""
        from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

        term = results.termination_condition
        sol_status = results.solution_status
        has_solution = sol_status in (SolutionStatus.optimal, SolutionStatus.feasible)
        if has_solution:
            results.solution_loader.load_vars()
        objective = results.incumbent_objective if has_solution else None
        bound = results.objective_bound
        if bound is not None and not math.isfinite(bound):
            bound = None
        if term == TerminationCondition.convergenceCriteriaSatisfied and has_solution:
            status = Status.OPTIMAL
            if bound is None:
                bound = objective
        elif term in (TerminationCondition.maxTimeLimit, TerminationCondition.iterationLimit):
            status = Status.TIME_LIMIT if has_solution else Status.ERROR
        elif term in (
            TerminationCondition.provenInfeasible,
            TerminationCondition.locallyInfeasible,
            TerminationCondition.infeasibleOrUnbounded,
        ):
            status = Status.INFEASIBLE
        elif term == TerminationCondition.unbounded:
            status = Status.UNBOUNDED
        elif has_solution:
            status = Status.FEASIBLE
        else:
            status = Status.ERROR
        return SolveResult(
            status=status,
            objective=objective,
            bound=bound,
            gap=_relative_gap(objective, bound),
            solve_s=elapsed,
            message=str(term),
            termination=term.name,
        )


def solve_model(model: pyo.ConcreteModel, options: SolverOptions | None = None) -> SolveResult:
    """Solve a Pyomo model once with the given options (HiGHS by default)."""
    return PersistentSolver(options).solve(model)
