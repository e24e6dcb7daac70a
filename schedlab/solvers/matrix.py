r"""A persistent LP/MIP held by the solver and changed in place, from numpy arrays.

:func:`matrix_model` returns a :class:`MatrixModel` for the backend ``options.solver`` names
(``highs`` by default, ``gurobi`` optionally).  It is the matrix-level counterpart of
:class:`~schedlab.solvers.base.PersistentSolver`: code that builds its model from arrays and
changes a few numbers between solves (the simulator's class LP, the Saturn Benders master)
uses it instead of a solver's own Python API, so the user's choice of solver reaches it.

The model (columns x, rows r):

.. math::

    \min / \max \; c^\top x \quad\text{s.t.}\quad
    \ell^r \le A x \le u^r, \qquad \ell^x \le x \le u^x, \qquad
    x_i \in \mathbb{Z} \text{ for the integer columns}

Bounds may be infinite (``numpy.inf``); a row with ``lower == upper`` is an equality.
Operations (all indices 0-based, in the order columns and rows were added):

* build: :meth:`~MatrixModel.add_columns` (bounds, costs, integrality, and optionally the new
  columns' entries in existing rows as CSC arrays), :meth:`~MatrixModel.add_rows` (CSR arrays)
  and :meth:`~MatrixModel.add_row` (one row from index and value arrays);
* change: :meth:`~MatrixModel.set_coefficients`, :meth:`~MatrixModel.set_column_bounds`,
  :meth:`~MatrixModel.set_row_bounds`, :meth:`~MatrixModel.set_costs`,
  :meth:`~MatrixModel.set_sense`, :meth:`~MatrixModel.set_integer`;
* start: an LP is re-solved from the previous basis automatically (the backends keep it
  across changes; :meth:`~MatrixModel.forget_basis` drops it); a MIP takes a start vector
  (:meth:`~MatrixModel.set_start`), which the solver checks and uses as its first incumbent
  when it is feasible;
* solve: :meth:`~MatrixModel.solve` with a time limit and a relative MIP gap (defaults from
  the :class:`~schedlab.solvers.base.SolverOptions`), returning a
  :class:`~schedlab.solvers.base.SolveResult`;
* read: :meth:`~MatrixModel.values` (x), :meth:`~MatrixModel.row_duals` (LP only),
  :meth:`~MatrixModel.saved_solutions` (other MIP solutions the solver kept, best first).

**Statuses** (the project's :class:`~schedlab.solution.Status`, the same rules as
:class:`~schedlab.solvers.base.PersistentSolver`).  ``objective`` is the value c^T x of the
solution the solver returns (None without one); ``bound`` is the solver's proven bound on
the optimum: for a minimization bound <= optimum <= objective (reversed for a maximization).
For an LP solved to optimality bound = objective (strong duality); for a MIP it is the
branch-and-bound dual bound.  ``gap = |bound - objective| / max(|objective|, 1e-10)``, always
computed from the solver's bound, None without one.

* ``optimal``: the solver proved optimality -- an LP's primal and dual solutions are feasible
  (within tolerances), a MIP's gap is within the allowed relative gap (``mip_gap``, stored as
  ``SolveResult.gap_tolerance``; ``gap`` says how close it really is);
* ``time_limit``: a time, iteration, node or solution limit (or an interrupt) stopped the
  solver while it held a feasible solution: the solution is usable, the gap says how far from
  proven it is;
* ``feasible``: the solver stopped for another reason (numerical trouble, an objective
  target) with a feasible solution;
* ``infeasible``: proven infeasible (when presolve reports "infeasible or unbounded" the
  backend solves again without the reductions that blur the two; an answer that stays
  undecided counts as infeasible, as in ``PersistentSolver``);
* ``unbounded``: proven unbounded;
* ``error``: anything else, including a limit reached before any feasible solution.

Backends: :mod:`schedlab.solvers.matrix_highs` (``highspy``) and
:mod:`schedlab.solvers.matrix_gurobi` (``gurobipy``, imported only when asked for).  When
gurobipy is missing, or its size-limited licence (at most 2000 variables and 2000 constraints)
refuses the model, a :class:`GurobiUnavailableError` says so in one line; it is both a
:class:`~schedlab.errors.SolverUnavailableError` (the user can pick another solver; the CLI
exits with code 2) and a :class:`~schedlab.errors.SolverError`.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from typing import Literal

import numpy as np
import numpy.typing as npt

from schedlab.errors import SolverError, SolverUnavailableError, UnknownNameError
from schedlab.solution import Status
from schedlab.solvers.base import KNOWN_SOLVERS, SolveResult, SolverOptions, _relative_gap

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
ArrayLike = npt.ArrayLike
Sense = Literal["minimize", "maximize"]


class GurobiUnavailableError(SolverUnavailableError, SolverError):
    """gurobipy is not installed, or its licence refuses the model (one plain line)."""


class MatrixModel(ABC):
    """A persistent LP/MIP in one solver (module docstring for the model and the statuses).

    Args:
        options: solver name, time limit, MIP gap, threads, LP method, seed, verbosity and
            raw backend options (``extra``, passed to the solver as given).
        presolve: True / False turns the solver's presolve on / off; None keeps its default.
        save_solutions: keep the improving MIP solutions found during a solve, for
            :meth:`saved_solutions` (HiGHS keeps them only when asked; Gurobi's solution pool
            is always read).
    """

    #: the solver's name in ``SolverOptions.solver``
    backend: str = ""

    def __init__(self, options: SolverOptions, *, presolve: bool | None = None,
                 save_solutions: bool = False) -> None:
        self.options = options
        self.presolve = presolve
        self.save_solutions = save_solutions
        self._integer = np.zeros(0, dtype=bool)
        self._num_rows = 0
        self._sense: Sense = "minimize"
        #: the result of the last :meth:`solve` (None before the first)
        self.last: SolveResult | None = None

    # shape ------------------------------------------------------------------------------
    @property
    def num_columns(self) -> int:
        """Columns in the model."""
        return len(self._integer)

    @property
    def num_rows(self) -> int:
        """Rows in the model."""
        return self._num_rows

    @property
    def is_mip(self) -> bool:
        """True when some column is integer."""
        return bool(self._integer.any())

    @property
    def sense(self) -> Sense:
        """``minimize`` (the default) or ``maximize``."""
        return self._sense

    # building ---------------------------------------------------------------------------
    def add_columns(
        self,
        lower: ArrayLike,
        upper: ArrayLike,
        cost: ArrayLike = 0.0,
        *,
        integer: ArrayLike = False,
        starts: ArrayLike | None = None,
        rows: ArrayLike | None = None,
        values: ArrayLike | None = None,
    ) -> IntArray:
        """Add n = len(lower) columns with bounds [lower, upper], objective coefficients
        ``cost`` and integrality ``integer`` (scalars are broadcast).  Their entries in
        existing rows, if any, are CSC arrays: column i has ``values[starts[i]:starts[i+1]]``
        in rows ``rows[starts[i]:starts[i+1]]``.  Returns the new columns' indices."""
        lo = np.atleast_1d(np.asarray(lower, dtype=float))
        n = len(lo)
        up = _broadcast(upper, n, "upper")
        c = _broadcast(cost, n, "cost")
        kind = np.broadcast_to(np.asarray(integer, dtype=bool), (n,)).copy()
        csc = _compressed(starts, rows, values, n, self._num_rows, "rows")
        first = self.num_columns
        self._add_columns(lo, up, c, kind, csc)
        self._integer = np.concatenate([self._integer, kind])
        return np.arange(first, first + n, dtype=np.int64)

    def add_rows(
        self,
        lower: ArrayLike,
        upper: ArrayLike,
        *,
        starts: ArrayLike | None = None,
        columns: ArrayLike | None = None,
        values: ArrayLike | None = None,
    ) -> IntArray:
        """Add n = len(lower) rows ``lower <= A x <= upper`` with A in CSR arrays: row i has
        ``values[starts[i]:starts[i+1]]`` in columns ``columns[starts[i]:starts[i+1]]``
        (no arrays: empty rows, to be filled by later columns).  Returns the new rows'
        indices."""
        lo = np.atleast_1d(np.asarray(lower, dtype=float))
        n = len(lo)
        up = _broadcast(upper, n, "upper")
        if np.any(lo > up):
            raise ValueError("a row's lower bound exceeds its upper bound")
        csr = _compressed(starts, columns, values, n, self.num_columns, "columns")
        first = self._num_rows
        self._add_rows(lo, up, csr)
        self._num_rows += n
        return np.arange(first, first + n, dtype=np.int64)

    def add_row(self, lower: float, upper: float, columns: ArrayLike,
                values: ArrayLike) -> int:
        """Add one row ``lower <= sum_i values[i] x[columns[i]] <= upper``; returns its index."""
        cols = np.asarray(columns, dtype=np.int64).reshape(-1)
        return int(self.add_rows([lower], [upper], starts=[0, len(cols)], columns=cols,
                                 values=values)[0])

    # changing ---------------------------------------------------------------------------
    def set_coefficients(self, rows: ArrayLike, columns: ArrayLike, values: ArrayLike) -> None:
        """A[rows[i], columns[i]] = values[i] (a new nonzero, a change, or 0 to remove); one
        column (or value) is used for every row."""
        r = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        c = np.atleast_1d(np.asarray(columns, dtype=np.int64))
        if len(c) == 1:
            c = np.repeat(c, len(r))
        if len(c) != len(r):
            raise ValueError("rows and columns differ in length")
        v = _broadcast(values, len(r), "values")
        _check_index(r, self._num_rows, "row")
        _check_index(c, self.num_columns, "column")
        self._set_coefficients(r, c, v)

    def set_column_bounds(self, columns: ArrayLike, lower: ArrayLike, upper: ArrayLike) -> None:
        """Bounds of the given columns."""
        c = np.atleast_1d(np.asarray(columns, dtype=np.int64))
        _check_index(c, self.num_columns, "column")
        self._set_column_bounds(c, _broadcast(lower, len(c), "lower"),
                                _broadcast(upper, len(c), "upper"))

    def set_row_bounds(self, rows: ArrayLike, lower: ArrayLike, upper: ArrayLike) -> None:
        """Bounds of the given rows."""
        r = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        _check_index(r, self._num_rows, "row")
        lo, up = _broadcast(lower, len(r), "lower"), _broadcast(upper, len(r), "upper")
        if np.any(lo > up):
            raise ValueError("a row's lower bound exceeds its upper bound")
        self._set_row_bounds(r, lo, up)

    def set_costs(self, columns: ArrayLike, costs: ArrayLike) -> None:
        """Objective coefficients of the given columns."""
        c = np.atleast_1d(np.asarray(columns, dtype=np.int64))
        _check_index(c, self.num_columns, "column")
        self._set_costs(c, _broadcast(costs, len(c), "costs"))

    def set_sense(self, sense: Sense) -> None:
        """``minimize`` or ``maximize`` the objective."""
        if sense not in ("minimize", "maximize"):
            raise ValueError(f"sense must be 'minimize' or 'maximize', got {sense!r}")
        self._sense = sense
        self._set_sense(sense)

    def set_integer(self, columns: ArrayLike, integer: ArrayLike = True) -> None:
        """Make the given columns integer (or continuous with ``integer=False``)."""
        c = np.atleast_1d(np.asarray(columns, dtype=np.int64))
        _check_index(c, self.num_columns, "column")
        kind = np.broadcast_to(np.asarray(integer, dtype=bool), (len(c),)).copy()
        self._set_integer(c, kind)
        self._integer[c] = kind

    def set_start(self, values: ArrayLike) -> None:
        """A MIP start: a value for every column (the solver checks it and uses it as its
        first incumbent when it is feasible)."""
        x = np.asarray(values, dtype=float).reshape(-1)
        if len(x) != self.num_columns:
            raise ValueError(f"a start needs {self.num_columns} values, got {len(x)}")
        self._set_start(x)

    @abstractmethod
    def forget_basis(self) -> None:
        """Drop the solver's basis and solution: the next solve starts from scratch."""

    # solving and reading ------------------------------------------------------------------
    def solve(self, *, time_limit_s: float | None = None,
              mip_gap: float | None = None) -> SolveResult:
        """Solve from the current state (warm where the backend can).  ``time_limit_s`` and
        ``mip_gap`` default to the options' values (None there: no limit, the solver's
        default gap); pass ``math.inf`` for no limit."""
        limit = self.options.time_limit_s if time_limit_s is None else time_limit_s
        gap = self.options.mip_gap if mip_gap is None else mip_gap
        if limit is not None and not limit > 0:
            raise ValueError(f"time_limit_s must be > 0, got {limit}")
        result = self._solve(math.inf if limit is None else float(limit), gap)
        result.gap_tolerance = gap if self.is_mip else None
        self.last = result
        return result

    def solve_proven(self, what: str) -> SolveResult:
        """Solve warm; when that ends without a proof of optimality, drop the basis and solve
        from scratch; a :class:`SolverError` naming ``what`` when that fails too."""
        result = self.solve()
        if result.status != Status.OPTIMAL:
            log.debug("warm re-solve of %s ended %s (%s); solving from scratch", what,
                      result.status.value, result.message)
            self.forget_basis()
            result = self.solve()
            if result.status != Status.OPTIMAL:
                raise SolverError(f"{self.backend} could not solve {what}: "
                                  f"{result.status.value} ({result.message})")
        return result

    def values(self) -> FloatArray:
        """x of the solution of the last solve (a SolverError without one)."""
        self._need_solution("values")
        return self._values()

    def row_duals(self) -> FloatArray:
        """Dual value of every row after an LP solve: the rate of change of the optimal
        objective per unit increase of the row's active bound (0 for a row whose bounds are
        both inactive).  A SolverError for a MIP or without an optimal LP solution."""
        if self.is_mip:
            raise SolverError("a MIP has no row duals (solve its LP relaxation instead)")
        if self.last is None or self.last.status != Status.OPTIMAL:
            raise SolverError("row duals need an LP solved to optimality")
        return self._row_duals()

    def saved_solutions(self) -> list[FloatArray]:
        """The MIP solutions the last solve kept, best first, the returned one among them
        (x vectors; with HiGHS only when made with ``save_solutions=True``); empty for an
        LP."""
        if not self.is_mip or self.last is None or not self.last.status.has_solution:
            return []
        return self._saved_solutions()

    def _need_solution(self, what: str) -> None:
        if self.last is None:
            raise SolverError(f"{what}: the model has not been solved")
        if not self.last.status.has_solution:
            raise SolverError(f"{what}: the last solve ended {self.last.status.value} "
                              "without a solution")

    # backend operations -------------------------------------------------------------------
    @abstractmethod
    def _add_columns(self, lower: FloatArray, upper: FloatArray, cost: FloatArray,
                     integer: npt.NDArray[np.bool_],
                     csc: tuple[IntArray, IntArray, FloatArray] | None) -> None: ...

    @abstractmethod
    def _add_rows(self, lower: FloatArray, upper: FloatArray,
                  csr: tuple[IntArray, IntArray, FloatArray] | None) -> None: ...

    @abstractmethod
    def _set_coefficients(self, rows: IntArray, columns: IntArray,
                          values: FloatArray) -> None: ...

    @abstractmethod
    def _set_column_bounds(self, columns: IntArray, lower: FloatArray,
                           upper: FloatArray) -> None: ...

    @abstractmethod
    def _set_row_bounds(self, rows: IntArray, lower: FloatArray, upper: FloatArray) -> None: ...

    @abstractmethod
    def _set_costs(self, columns: IntArray, costs: FloatArray) -> None: ...

    @abstractmethod
    def _set_sense(self, sense: Sense) -> None: ...

    @abstractmethod
    def _set_integer(self, columns: IntArray, integer: npt.NDArray[np.bool_]) -> None: ...

    @abstractmethod
    def _set_start(self, values: FloatArray) -> None: ...

    @abstractmethod
    def _solve(self, time_limit_s: float, mip_gap: float | None) -> SolveResult: ...

    @abstractmethod
    def _values(self) -> FloatArray: ...

    @abstractmethod
    def _row_duals(self) -> FloatArray: ...

    @abstractmethod
    def _saved_solutions(self) -> list[FloatArray]: ...


def matrix_model(options: SolverOptions | None = None, *, presolve: bool | None = None,
                 save_solutions: bool = False) -> MatrixModel:
    """An empty :class:`MatrixModel` of the backend ``options.solver`` (default HiGHS)."""
    opts = options or SolverOptions()
    if opts.solver == "highs":
        from schedlab.solvers.matrix_highs import HighsMatrixModel

        return HighsMatrixModel(opts, presolve=presolve, save_solutions=save_solutions)
    if opts.solver == "gurobi":
        from schedlab.solvers.matrix_gurobi import GurobiMatrixModel

        return GurobiMatrixModel(opts, presolve=presolve, save_solutions=save_solutions)
    raise UnknownNameError(
        f"unknown solver {opts.solver!r} (known: {', '.join(KNOWN_SOLVERS)})", field="--solver"
    )


def solve_result(
    status: Status,
    objective: float | None,
    bound: float | None,
    solve_s: float,
    message: str,
) -> SolveResult:
    """A :class:`SolveResult` with the gap computed from ``bound`` (module docstring); an
    infinite bound counts as none."""
    if bound is not None and not math.isfinite(bound):
        bound = None
    return SolveResult(status=status, objective=objective, bound=bound,
                       gap=_relative_gap(objective, bound), solve_s=solve_s,
                       message=message, termination=message)


def limit_status(has_solution: bool) -> Status:
    """A limit (time, iterations, nodes, solutions, interrupt) stopped the solver."""
    return Status.TIME_LIMIT if has_solution else Status.ERROR


# ------------------------------------------------------------------------------ helpers


def _broadcast(value: ArrayLike, n: int, name: str) -> FloatArray:
    array = np.asarray(value, dtype=float)
    try:
        return np.broadcast_to(array, (n,)).astype(float, copy=True)
    except ValueError:
        raise ValueError(f"{name} has {array.size} values, expected {n}") from None


def _check_index(index: IntArray, size: int, what: str) -> None:
    if len(index) and (index.min() < 0 or index.max() >= size):
        raise IndexError(f"{what} index out of range 0..{size - 1}")


def _compressed(
    starts: ArrayLike | None,
    index: ArrayLike | None,
    values: ArrayLike | None,
    n: int,
    size: int,
    what: str,
) -> tuple[IntArray, IntArray, FloatArray] | None:
    """Validated compressed arrays (starts with n + 1 entries), or None when none given."""
    if starts is None and index is None and values is None:
        return None
    if starts is None or index is None or values is None:
        raise ValueError(f"give starts, {what} and values together")
    s = np.asarray(starts, dtype=np.int64).reshape(-1)
    i = np.asarray(index, dtype=np.int64).reshape(-1)
    v = np.asarray(values, dtype=float).reshape(-1)
    if len(s) != n + 1 or s[0] != 0 or s[-1] != len(i) or np.any(np.diff(s) < 0):
        raise ValueError(f"starts must rise from 0 to the number of entries ({n + 1} values)")
    if len(v) != len(i):
        raise ValueError(f"{what} and values differ in length")
    _check_index(i, size, what.rstrip("s"))
    return s, i, v
