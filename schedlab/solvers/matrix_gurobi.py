"""The Gurobi backend of :class:`~schedlab.solvers.matrix.MatrixModel`, over ``gurobipy``.

gurobipy is imported when the first model is made; without it, or when Gurobi's licence
refuses a model (the pip package's size-limited licence allows at most 2000 variables and 2000
constraints), a :class:`~schedlab.solvers.matrix.GurobiUnavailableError` says so.  One
silent Gurobi environment is shared by all models of the process.

Rows: Gurobi's linear constraints have one sense, so a row with two finite, different bounds
is held as two constraints (``>= lower`` and ``<= upper``) over the same coefficients; its
dual is the sum of theirs.  A row without finite bounds is ``<= GRB.INFINITY``.  Gurobi
re-solves a changed LP from its previous basis by itself; a MIP start sets ``Start``.

Statuses (rules in :mod:`schedlab.solvers.matrix`): a solution exists when ``SolCount > 0``;
``objective`` is ``ObjVal``; ``bound`` is ``ObjBound`` for a MIP and the objective for an LP
Gurobi proved ``OPTIMAL``.  ``OPTIMAL`` is ``optimal``; ``TIME_LIMIT``, ``ITERATION_LIMIT``,
``NODE_LIMIT``, ``SOLUTION_LIMIT``, ``INTERRUPTED``, ``WORK_LIMIT`` and ``MEM_LIMIT`` are
``time_limit`` with a solution and ``error`` without; ``INFEASIBLE`` is ``infeasible``;
``UNBOUNDED`` is ``unbounded``; ``INF_OR_UNBD`` (presolve could not tell) is settled by
solving again with ``DualReductions=0``, and counts as ``infeasible`` if it stays
undecided; any other status is ``feasible`` with a solution and ``error`` without.  Saved
solutions are the solution pool (``Xn``, best first).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from schedlab.errors import SolverError
from schedlab.solution import Status
from schedlab.solvers.base import SolveResult, SolverOptions
from schedlab.solvers.matrix import (
    FloatArray,
    GurobiUnavailableError,
    IntArray,
    MatrixModel,
    Sense,
    limit_status,
    solve_result,
)

#: gurobipy's error number for "Model too large for size-limited license"
SIZE_LIMITED_LICENCE = 10010
LICENCE_MESSAGE = (
    "Gurobi's size-limited licence refuses this model (at most 2000 variables and 2000 "
    "constraints without a licence file); use --solver highs or install a licence"
)

_env_lock = threading.Lock()
_env: Any = None


def _gurobipy() -> Any:
    try:
        import gurobipy
    except ImportError:
        raise GurobiUnavailableError(
            "solver 'gurobi' is not installed (pip install 'schedlab[gurobi]')",
            field="--solver",
        ) from None
    return gurobipy


def _shared_env(gp: Any) -> Any:
    """One started, silent Gurobi environment for the process."""
    global _env
    with _env_lock:
        if _env is None:
            try:
                env = gp.Env(empty=True)
                env.setParam("OutputFlag", 0)
                env.start()
            except gp.GurobiError as exc:
                raise GurobiUnavailableError(f"Gurobi cannot start: {exc}",
                                             field="--solver") from None
            _env = env
        return _env


class GurobiMatrixModel(MatrixModel):
    """:class:`~schedlab.solvers.matrix.MatrixModel` in one persistent ``gurobipy.Model``."""

    backend = "gurobi"

    def __init__(self, options: SolverOptions, *, presolve: bool | None = None,
                 save_solutions: bool = False) -> None:
        super().__init__(options, presolve=presolve, save_solutions=save_solutions)
        gp = _gurobipy()
        self._gp = gp
        self._grb = gp.GRB
        self.model = gp.Model(env=_shared_env(gp))
        params = self.model.Params
        params.OutputFlag = 1 if options.verbose else 0
        if presolve is not None:
            params.Presolve = -1 if presolve else 0
        if options.threads is not None:
            params.Threads = int(options.threads)
        if options.seed is not None:
            params.Seed = int(options.seed)
        if options.lp_method == "simplex":
            params.Method = 1
        elif options.lp_method == "ipm":
            params.Method = 2
        for name, value in options.extra.items():
            try:
                self.model.setParam(name, value)
            except gp.GurobiError as exc:
                raise SolverError(f"Gurobi refused option {name} = {value!r}: {exc}") from None
        self._vars: list[Any] = []
        self._main: list[Any] = []  # per row: its constraint (the >= part of a ranged row)
        self._upper: list[Any] = []  # per row: the <= part of a ranged row, else None

    # rows as Gurobi constraints -----------------------------------------------------------
    def _row_form(self, lower: float, upper: float) -> tuple[str, float, bool]:
        """(sense, rhs of the main constraint, whether an upper part is needed)."""
        inf = self._grb.INFINITY
        has_lo, has_up = math.isfinite(lower), math.isfinite(upper)
        if has_lo and has_up and lower == upper:
            return "=", lower, False
        if has_lo:
            return ">", lower, has_up
        return "<", (upper if has_up else inf), False

    def _constraints_of(self, rows: list[int]) -> tuple[list[Any], list[int]]:
        """Every Gurobi constraint of ``rows`` and, for each, the position in ``rows``."""
        constrs, owner = [], []
        for pos, r in enumerate(rows):
            constrs.append(self._main[r])
            owner.append(pos)
            if self._upper[r] is not None:
                constrs.append(self._upper[r])
                owner.append(pos)
        return constrs, owner

    # building -----------------------------------------------------------------------------
    def _add_columns(self, lower: FloatArray, upper: FloatArray, cost: FloatArray,
                     integer: npt.NDArray[np.bool_],
                     csc: tuple[IntArray, IntArray, FloatArray] | None) -> None:
        grb = self._grb
        lo = np.clip(lower, -grb.INFINITY, grb.INFINITY)
        up = np.clip(upper, -grb.INFINITY, grb.INFINITY)
        vtype = np.where(integer, grb.INTEGER, grb.CONTINUOUS)
        if csc is None:
            new = self.model.addMVar(len(lo), lb=lo, ub=up, obj=cost, vtype=vtype).tolist()
            self._vars.extend(new)
            return
        starts, rows, values = csc
        for i in range(len(lo)):
            part = slice(starts[i], starts[i + 1])
            constrs, owner = self._constraints_of(rows[part].tolist())
            coefs = values[part][owner].tolist()
            column = self._gp.Column(coefs, constrs)
            self._vars.append(self.model.addVar(lb=lo[i], ub=up[i], obj=cost[i],
                                                vtype=vtype[i], column=column))

    def _add_rows(self, lower: FloatArray, upper: FloatArray,
                  csr: tuple[IntArray, IntArray, FloatArray] | None) -> None:
        import scipy.sparse as sp

        n = len(lower)
        forms = [self._row_form(lo, up) for lo, up in zip(lower.tolist(), upper.tolist(),
                                                           strict=True)]
        if csr is None:
            matrix = sp.csr_matrix((n, self.num_columns))
        else:
            matrix = sp.csr_matrix((csr[2], csr[1], csr[0]), shape=(n, self.num_columns))
        x = self._gp.MVar.fromlist(self._vars) if self._vars else None
        if x is None:  # no columns yet: constraints over nothing
            expr = self._gp.LinExpr()
            main = [self.model.addLConstr(expr, s, rhs) for s, rhs, _ in forms]
        else:
            main = self.model.addMConstr(matrix, x, np.array([s for s, _, _ in forms]),
                                         np.array([rhs for _, rhs, _ in forms])).tolist()
        self._main.extend(main)
        upper_part: list[Any] = [None] * n
        ranged = [i for i, (_, _, extra) in enumerate(forms) if extra]
        if ranged:
            if x is None:
                made = [self.model.addLConstr(self._gp.LinExpr(), "<", upper[i])
                        for i in ranged]
            else:
                made = self.model.addMConstr(matrix[ranged], x, "<", upper[ranged]).tolist()
            for i, constr in zip(ranged, made, strict=True):
                upper_part[i] = constr
        self._upper.extend(upper_part)

    # changing -----------------------------------------------------------------------------
    def _set_coefficients(self, rows: IntArray, columns: IntArray, values: FloatArray) -> None:
        for r, c, v in zip(rows.tolist(), columns.tolist(), values.tolist(), strict=True):
            var = self._vars[c]
            self.model.chgCoeff(self._main[r], var, v)
            if self._upper[r] is not None:
                self.model.chgCoeff(self._upper[r], var, v)

    def _set_column_bounds(self, columns: IntArray, lower: FloatArray,
                           upper: FloatArray) -> None:
        grb = self._grb
        chosen = [self._vars[c] for c in columns.tolist()]
        self.model.setAttr("LB", chosen, np.clip(lower, -grb.INFINITY, grb.INFINITY).tolist())
        self.model.setAttr("UB", chosen, np.clip(upper, -grb.INFINITY, grb.INFINITY).tolist())

    def _set_row_bounds(self, rows: IntArray, lower: FloatArray, upper: FloatArray) -> None:
        for r, lo, up in zip(rows.tolist(), lower.tolist(), upper.tolist(), strict=True):
            sense, rhs, needs_upper = self._row_form(lo, up)
            main = self._main[r]
            main.Sense = sense
            main.RHS = rhs
            part = self._upper[r]
            if needs_upper and part is None:
                self.model.update()
                self._upper[r] = self.model.addLConstr(self.model.getRow(main), "<", up)
            elif needs_upper:
                part.RHS = up
            elif part is not None:
                self.model.remove(part)
                self._upper[r] = None

    def _set_costs(self, columns: IntArray, costs: FloatArray) -> None:
        self.model.setAttr("Obj", [self._vars[c] for c in columns.tolist()], costs.tolist())

    def _set_sense(self, sense: Sense) -> None:
        self.model.ModelSense = self._grb.MAXIMIZE if sense == "maximize" else self._grb.MINIMIZE

    def _set_integer(self, columns: IntArray, integer: npt.NDArray[np.bool_]) -> None:
        grb = self._grb
        self.model.setAttr("VType", [self._vars[c] for c in columns.tolist()],
                           [grb.INTEGER if flag else grb.CONTINUOUS for flag in integer])

    def _set_start(self, values: FloatArray) -> None:
        self.model.setAttr("Start", self._vars, values.tolist())

    def forget_basis(self) -> None:
        self.model.reset(0)

    # solving ------------------------------------------------------------------------------
    def _solve(self, time_limit_s: float, mip_gap: float | None) -> SolveResult:
        grb = self._grb
        params = self.model.Params
        params.TimeLimit = min(time_limit_s, grb.INFINITY)
        if mip_gap is not None:
            params.MIPGap = float(mip_gap)
        started = time.perf_counter()
        try:
            self.model.optimize()
            if self.model.Status == grb.INF_OR_UNBD:
                # presolve could not tell: solve again without dual reductions
                params.DualReductions = 0
                try:
                    self.model.optimize()
                finally:
                    params.DualReductions = 1
        except self._gp.GurobiError as exc:
            if getattr(exc, "errno", None) == SIZE_LIMITED_LICENCE:
                raise GurobiUnavailableError(
                    f"{LICENCE_MESSAGE} (this model: {self.num_columns} variables, "
                    f"{self.model.NumConstrs} constraints)", field="--solver") from None
            raise SolverError(f"Gurobi failed: {exc}") from exc
        elapsed = time.perf_counter() - started
        code = self.model.Status
        has_solution = self.model.SolCount > 0
        objective = float(self.model.ObjVal) if has_solution else None
        bound: float | None
        if self.is_mip:
            try:
                bound = float(self.model.ObjBound)
            except self._gp.GurobiError:  # no bound (e.g. stopped before the root)
                bound = None
        else:
            bound = objective if code == grb.OPTIMAL else None
        limits = {grb.TIME_LIMIT, grb.ITERATION_LIMIT, grb.NODE_LIMIT, grb.SOLUTION_LIMIT,
                  grb.INTERRUPTED, grb.WORK_LIMIT, grb.MEM_LIMIT}
        if code == grb.OPTIMAL and has_solution:
            status = Status.OPTIMAL
        elif code in limits:
            status = limit_status(has_solution)
        elif code in (grb.INFEASIBLE, grb.INF_OR_UNBD):
            status, objective, bound = Status.INFEASIBLE, None, None
        elif code == grb.UNBOUNDED:
            status, objective, bound = Status.UNBOUNDED, None, None
        else:
            status = Status.FEASIBLE if has_solution else Status.ERROR
        if not status.has_solution:
            objective = None
        return solve_result(status, objective, bound, elapsed, _STATUS_NAMES.get(code, str(code)))

    # reading ------------------------------------------------------------------------------
    def _values(self) -> FloatArray:
        return np.asarray(self.model.getAttr("X", self._vars), dtype=float)

    def _row_duals(self) -> FloatArray:
        duals = np.asarray(self.model.getAttr("Pi", self._main), dtype=float)
        for r, part in enumerate(self._upper):
            if part is not None:
                duals[r] += float(part.Pi)
        return duals

    def _saved_solutions(self) -> list[FloatArray]:
        params = self.model.Params
        out = []
        for i in range(self.model.SolCount):
            params.SolutionNumber = i
            out.append(np.asarray(self.model.getAttr("Xn", self._vars), dtype=float))
        return out


_STATUS_NAMES = {1: "LOADED", 2: "OPTIMAL", 3: "INFEASIBLE", 4: "INF_OR_UNBD", 5: "UNBOUNDED",
                 6: "CUTOFF", 7: "ITERATION_LIMIT", 8: "NODE_LIMIT", 9: "TIME_LIMIT",
                 10: "SOLUTION_LIMIT", 11: "INTERRUPTED", 12: "NUMERIC", 13: "SUBOPTIMAL",
                 14: "INPROGRESS", 15: "USER_OBJ_LIMIT", 16: "WORK_LIMIT", 17: "MEM_LIMIT"}
