"""The HiGHS backend of :class:`~schedlab.solvers.matrix.MatrixModel`, over ``highspy``.

One silent ``highspy.Highs`` (:func:`~schedlab.solvers.highs_quiet.new_highs`) holds the model;
every operation is the matching ``Highs`` call, so HiGHS keeps its basis across changes and
re-solves an LP warm (dual simplex after bound or coefficient changes and added rows).

Statuses (rules in :mod:`schedlab.solvers.matrix`): a solution exists when HiGHS reports a
feasible primal solution (``primal_solution_status``); ``objective`` is
``objective_function_value``; ``bound`` is ``mip_dual_bound`` for a MIP and the objective for
an LP HiGHS proved optimal (``kOptimal``).  ``kOptimal`` is ``optimal``; ``kTimeLimit``,
``kIterationLimit``, ``kSolutionLimit``, ``kInterrupt`` and ``kMemoryLimit`` are ``time_limit``
with a solution and ``error`` without; ``kInfeasible`` is ``infeasible``; ``kUnbounded`` is
``unbounded``; ``kUnboundedOrInfeasible`` (presolve could not tell) is settled by solving
again with presolve off, and counts as ``infeasible`` if it stays undecided; an empty
model (no columns) is ``optimal`` with objective 0; any other status is ``feasible`` with a
solution and ``error`` without.

Options: ``time_limit`` and ``mip_rel_gap`` per solve; ``threads`` and ``random_seed`` from
the options; ``solver`` = ``simplex`` / ``ipm`` (with crossover) from ``lp_method`` for an
LP only (HiGHS would drop the integrality of a MIP under those); ``presolve`` on / off when
asked; ``mip_improving_solution_save`` with ``save_solutions``; ``extra`` as given.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt

from schedlab.errors import SolverError
from schedlab.solution import Status
from schedlab.solvers.base import SolveResult, SolverOptions
from schedlab.solvers.highs_quiet import new_highs
from schedlab.solvers.interrupt import run_interruptibly
from schedlab.solvers.matrix import (
    FloatArray,
    IntArray,
    MatrixModel,
    Sense,
    limit_status,
    solve_result,
)

log = logging.getLogger(__name__)

_MS = highspy.HighsModelStatus
_LIMITS = frozenset({_MS.kTimeLimit, _MS.kIterationLimit, _MS.kSolutionLimit, _MS.kInterrupt,
                     _MS.kMemoryLimit})
_INFEASIBLE = frozenset({_MS.kInfeasible, _MS.kUnboundedOrInfeasible})
_FEASIBLE = highspy.SolutionStatus.kSolutionStatusFeasible
_INF = highspy.kHighsInf


def _highs_bounds(values: FloatArray) -> FloatArray:
    """numpy infinities as HiGHS's (the same value today; kept explicit)."""
    return np.clip(values, -_INF, _INF)


def _refused(highs: highspy.Highs, status: highspy.HighsStatus, what: str,
             values: FloatArray, cost: FloatArray | None = None) -> None:
    """Raise a :class:`SolverError` when HiGHS refused a change (it then leaves the model as
    it was: rows it refused are missing, and an LP without them can read as unbounded).  Its
    usual reason: a coefficient at or above ``large_matrix_value`` (1e15)."""
    if status != highspy.HighsStatus.kError:
        return
    largest = float(np.abs(values).max()) if len(values) else 0.0
    option = highs.getOptionValue("large_matrix_value")
    limit = option[1] if isinstance(option, tuple) else option
    costs = f", largest |cost| {float(np.abs(cost).max()):.3g}" if cost is not None \
        and len(cost) else ""
    raise SolverError(f"HiGHS refused {what} (largest |coefficient| "
                      f"{largest:.3g}{costs}; HiGHS refuses coefficients of {limit:g} or more)")


class HighsMatrixModel(MatrixModel):
    """:class:`~schedlab.solvers.matrix.MatrixModel` in one persistent ``highspy.Highs``."""

    backend = "highs"

    def __init__(self, options: SolverOptions, *, presolve: bool | None = None,
                 save_solutions: bool = False) -> None:
        super().__init__(options, presolve=presolve, save_solutions=save_solutions)
        self.highs = new_highs(verbose=options.verbose)
        self._set: dict[str, Any] = {}  # options as last set, so a re-solve sets only changes
        if presolve is not None:
            self._option("presolve", "on" if presolve else "off")
        if save_solutions:
            self._option("mip_improving_solution_save", True)
        if options.threads is not None:
            self._option("threads", int(options.threads))
        if options.seed is not None:
            self._option("random_seed", int(options.seed))
        for name, value in options.extra.items():
            self._option(name, value)

    def _option(self, name: str, value: Any) -> None:
        if self._set.get(name, _UNSET) == value:
            return
        if self.highs.setOptionValue(name, value) != highspy.HighsStatus.kOk:
            raise SolverError(f"HiGHS refused option {name} = {value!r}")
        self._set[name] = value

    # building -----------------------------------------------------------------------------
    def _add_columns(self, lower: FloatArray, upper: FloatArray, cost: FloatArray,
                     integer: npt.NDArray[np.bool_],
                     csc: tuple[IntArray, IntArray, FloatArray] | None) -> None:
        n = len(lower)
        first = self.num_columns
        if csc is None:
            starts, index, values = np.zeros(n, np.int32), np.zeros(0, np.int32), np.zeros(0)
        else:
            starts = csc[0][:-1].astype(np.int32)
            index, values = csc[1].astype(np.int32), csc[2]
        status = self.highs.addCols(n, cost, _highs_bounds(lower), _highs_bounds(upper),
                                    len(index), starts, index, values)
        _refused(self.highs, status, "the model's columns", values, cost)
        if integer.any():
            cols = first + np.flatnonzero(integer).astype(np.int32)
            self.highs.changeColsIntegrality(
                len(cols), cols, np.full(len(cols), highspy.HighsVarType.kInteger.value,
                                         dtype=np.uint8))

    def _add_rows(self, lower: FloatArray, upper: FloatArray,
                  csr: tuple[IntArray, IntArray, FloatArray] | None) -> None:
        n = len(lower)
        if csr is None:
            starts, index, values = np.zeros(n, np.int32), np.zeros(0, np.int32), np.zeros(0)
        else:
            starts = csr[0][:-1].astype(np.int32)
            index, values = csr[1].astype(np.int32), csr[2]
        status = self.highs.addRows(n, _highs_bounds(lower), _highs_bounds(upper), len(index),
                                    starts, index, values)
        _refused(self.highs, status, "the model's rows", values)

    # changing -----------------------------------------------------------------------------
    def _set_coefficients(self, rows: IntArray, columns: IntArray, values: FloatArray) -> None:
        change = self.highs.changeCoeff
        for r, c, v in zip(rows.tolist(), columns.tolist(), values.tolist(), strict=True):
            _refused(self.highs, change(r, c, v), "a coefficient change", np.array([v]))

    def _set_column_bounds(self, columns: IntArray, lower: FloatArray,
                           upper: FloatArray) -> None:
        self.highs.changeColsBounds(len(columns), columns.astype(np.int32),
                                    _highs_bounds(lower), _highs_bounds(upper))

    def _set_row_bounds(self, rows: IntArray, lower: FloatArray, upper: FloatArray) -> None:
        self.highs.changeRowsBounds(len(rows), rows.astype(np.int32), _highs_bounds(lower),
                                    _highs_bounds(upper))

    def _set_costs(self, columns: IntArray, costs: FloatArray) -> None:
        self.highs.changeColsCost(len(columns), columns.astype(np.int32), costs)

    def _set_sense(self, sense: Sense) -> None:
        self.highs.changeObjectiveSense(highspy.ObjSense.kMaximize if sense == "maximize"
                                        else highspy.ObjSense.kMinimize)

    def _set_integer(self, columns: IntArray, integer: npt.NDArray[np.bool_]) -> None:
        kinds = np.where(integer, highspy.HighsVarType.kInteger.value,
                         highspy.HighsVarType.kContinuous.value).astype(np.uint8)
        self.highs.changeColsIntegrality(len(columns), columns.astype(np.int32), kinds)

    def _set_start(self, values: FloatArray) -> None:
        start = highspy.HighsSolution()
        start.col_value = list(values)
        start.value_valid = True
        self.highs.setSolution(start)

    def forget_basis(self) -> None:
        self.highs.clearSolver()

    # solving ------------------------------------------------------------------------------
    def _solve(self, time_limit_s: float, mip_gap: float | None) -> SolveResult:
        self._option("time_limit", time_limit_s)
        if mip_gap is not None:
            self._option("mip_rel_gap", float(mip_gap))
        if not self.is_mip and self.options.lp_method != "auto":
            self._option("solver", self.options.lp_method)
            if self.options.lp_method == "ipm":
                self._option("run_crossover", "on")
        elif self.is_mip and "solver" in self._set and "solver" not in self.options.extra:
            self._option("solver", "choose")
        started = time.perf_counter()
        run_interruptibly(self.highs)
        if self.highs.getModelStatus() == _MS.kUnboundedOrInfeasible:
            self._settle_without_presolve()
        elif self.is_mip and self._stale_solution():
            log.info("HiGHS reported a MIP optimum whose solution vector it did not return "
                     "(the start was left in its place); solving again without presolve")
            self._settle_without_presolve()
        elapsed = time.perf_counter() - started
        model_status = self.highs.getModelStatus()
        info = self.highs.getInfo()
        has_solution = info.primal_solution_status == _FEASIBLE
        objective = float(info.objective_function_value) if has_solution else None
        message = self.highs.modelStatusToString(model_status)
        if model_status == _MS.kModelEmpty:
            # no columns: the empty model's optimum 0 is attained and proven by definition
            return solve_result(Status.OPTIMAL, 0.0, 0.0, elapsed, message)
        bound: float | None
        if self.is_mip:
            bound = float(info.mip_dual_bound)
        else:
            bound = objective if model_status == _MS.kOptimal else None
        if model_status == _MS.kOptimal and has_solution:
            status = Status.OPTIMAL
        elif model_status in _LIMITS:
            status = limit_status(has_solution)
        elif model_status in _INFEASIBLE:
            status, objective, bound = Status.INFEASIBLE, None, None
        elif model_status == _MS.kUnbounded:
            status, objective, bound = Status.UNBOUNDED, None, None
        else:
            status = Status.FEASIBLE if has_solution else Status.ERROR
        if not status.has_solution:
            objective = None
        return solve_result(status, objective, bound, elapsed, message)

    def _stale_solution(self) -> bool:
        """True when the solution vector's objective is not the one HiGHS reports.

        Seen with HiGHS 1.16 on small MIPs that presolve solves outright: the status and
        objective are the optimum's, but ``col_value`` still holds the start given with
        :meth:`set_start` (Hare's exact MILP: objective 5 reported, the start's 7 returned).
        """
        info = self.highs.getInfo()
        if info.primal_solution_status != _FEASIBLE:
            return False
        lp = self.highs.getLp()
        x = np.asarray(self.highs.getSolution().col_value, dtype=float)
        value = float(np.dot(np.asarray(lp.col_cost_, dtype=float), x) + lp.offset_)
        reported = float(info.objective_function_value)
        return abs(value - reported) > 1e-6 * max(1.0, abs(reported))

    def _settle_without_presolve(self) -> None:
        """Solve again without presolve: after it answered "infeasible or unbounded" (to
        tell which), or returned a stale solution vector (:meth:`_stale_solution`)."""
        saved = self._set.get("presolve", _UNSET)
        self._option("presolve", "off")
        run_interruptibly(self.highs)
        if saved is _UNSET:
            self._option("presolve", "choose")
        else:
            self._option("presolve", saved)

    # reading ------------------------------------------------------------------------------
    def _values(self) -> FloatArray:
        return np.asarray(self.highs.getSolution().col_value, dtype=float)

    def _row_duals(self) -> FloatArray:
        if self.highs.getInfo().dual_solution_status != _FEASIBLE:
            raise SolverError("HiGHS has no feasible dual solution for this LP")
        return np.asarray(self.highs.getSolution().row_dual, dtype=float)

    def _saved_solutions(self) -> list[FloatArray]:
        saved = self.highs.getSavedMipSolutions()
        return [np.asarray(s.col_value, dtype=float) for s in reversed(saved)]


_UNSET = object()
