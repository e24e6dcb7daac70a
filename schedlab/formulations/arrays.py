"""Pyomo rows and expressions from sparse arrays (it knows no paper).

A formulation computes its coefficient matrix with numpy / scipy and hands it over here; each
row becomes one Pyomo ``LinearExpression`` built from the row's slice of the CSR arrays (no
Python expression algebra per element), so building a model costs one Pyomo object per row.

* :func:`add_rows`: the indexed constraint ``lower[i] <= (A x)_i <= upper[i]``;
* :func:`add_expressions`: the indexed expression ``(A x)_i``;
* :func:`linear_expression`: one ``sum_i coefs[i] vars[i]`` (objectives, single rows);
* :func:`csr_arrays` / :func:`csr_from_entries`: CSR arrays or a matrix from (row, column,
  value) entries, keeping a chosen order of the terms within each row.

``variables`` lists the model's variables in column order (column j of A multiplies
``variables[j]``); ``index`` names the rows (default ``range(n)``: row i is ``name[i]``).
Within a row the terms keep the matrix's order.  The order matters where a variable first
appears: Pyomo hands a solver its columns in order of first appearance in the rows, so a
model whose rows name the variables in the same order is the same model to the solver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from schedlab.lazy import LazyModule

if TYPE_CHECKING:
    import pyomo.environ as pyo
    import scipy.sparse as sp
    from pyomo.common import gc_manager as _gc_manager
    from pyomo.core.expr import numeric_expr as _numeric_expr
    from pyomo.core.expr.numeric_expr import LinearExpression
else:  # imported at the first use (schedlab.lazy)
    pyo = LazyModule("pyomo.environ")
    sp = LazyModule("scipy.sparse")
    _numeric_expr = LazyModule("pyomo.core.expr.numeric_expr")
    _gc_manager = LazyModule("pyomo.common.gc_manager")


FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Bounds = FloatArray | float | None


def csr_arrays(
    rows: npt.ArrayLike,
    cols: npt.ArrayLike,
    values: npt.ArrayLike,
    num_rows: int,
    position: npt.ArrayLike | None = None,
) -> tuple[IntArray, IntArray, FloatArray]:
    """CSR arrays (starts, columns, values) of the entries (rows[i], cols[i], values[i]):
    row r holds ``columns[starts[r]:starts[r+1]]``.  Within a row the entries are ordered by
    ``position`` (ties and the default: the order given).  Duplicates are not merged."""
    r = np.asarray(rows, dtype=np.int64).reshape(-1)
    if position is None:
        order = np.argsort(r, kind="stable")
    else:
        order = np.lexsort((np.asarray(position).reshape(-1), r))
    starts = np.zeros(num_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=num_rows), out=starts[1:])
    return (starts, np.asarray(cols, dtype=np.int64).reshape(-1)[order],
            np.asarray(values, dtype=float).reshape(-1)[order])


def csr_from_entries(
    rows: npt.ArrayLike,
    cols: npt.ArrayLike,
    values: npt.ArrayLike,
    shape: tuple[int, int],
    position: npt.ArrayLike | None = None,
) -> sp.csr_matrix:
    """The matrix of :func:`csr_arrays`' entries, terms in that order within each row."""
    starts, columns, data = csr_arrays(rows, cols, values, shape[0], position)
    return sp.csr_matrix((data, columns, starts), shape=shape)


def linear_expression(coefs: npt.ArrayLike, variables: Sequence[Any]) -> LinearExpression:
    """sum_i coefs[i] variables[i] as one LinearExpression (coefficients as floats)."""
    values = np.asarray(coefs, dtype=float).reshape(-1)
    if len(values) != len(variables):
        raise ValueError(f"{len(values)} coefficients for {len(variables)} variables")
    return _numeric_expr.LinearExpression(linear_coefs=values.tolist(),
                                          linear_vars=list(variables))


def row_expressions(matrix: sp.csr_matrix | sp.csr_array,
                    variables: Sequence[Any]) -> list[LinearExpression | None]:
    """One LinearExpression per row of ``matrix`` over ``variables`` (None: an empty row)."""
    csr = sp.csr_matrix(matrix)
    if csr.shape[1] != len(variables):
        raise ValueError(f"the matrix has {csr.shape[1]} columns for {len(variables)} variables")
    indptr = csr.indptr.tolist()
    cols = csr.indices.tolist()
    values = csr.data.astype(float).tolist()
    out: list[LinearExpression | None] = []
    expression = _numeric_expr.LinearExpression
    for i in range(csr.shape[0]):
        lo, hi = indptr[i], indptr[i + 1]
        if lo == hi:
            out.append(None)
            continue
        out.append(expression(linear_coefs=values[lo:hi],
                              linear_vars=[variables[j] for j in cols[lo:hi]]))
    return out


def _bound_list(bound: Bounds, n: int) -> list[float | None]:
    if bound is None:
        return [None] * n
    values = np.broadcast_to(np.asarray(bound, dtype=float), (n,))
    return [None if not np.isfinite(v) else float(v) for v in values.tolist()]


def add_rows(
    model: pyo.Block,
    name: str,
    matrix: sp.csr_matrix | sp.csr_array,
    variables: Sequence[Any],
    lower: Bounds,
    upper: Bounds,
    *,
    index: Sequence[Any] | pyo.Set | None = None,
) -> pyo.Constraint:
    """Add ``lower <= matrix @ variables <= upper`` as the indexed constraint ``name``.

    ``lower`` / ``upper``: arrays (one bound per row), scalars, or None (no bound; infinite
    entries count as none).  An empty row is skipped when 0 satisfies its bounds; otherwise
    it is an error (the row could never hold).  Returns the constraint.
    """
    with _gc_manager.PauseGC():  # many small objects, none garbage: collecting them is pure cost
        return _add_rows(model, name, matrix, variables, lower, upper, index)


def _add_rows(
    model: pyo.Block,
    name: str,
    matrix: sp.csr_matrix | sp.csr_array,
    variables: Sequence[Any],
    lower: Bounds,
    upper: Bounds,
    index: Sequence[Any] | pyo.Set | None,
) -> pyo.Constraint:
    exprs = row_expressions(matrix, variables)
    n = len(exprs)
    keys = list(range(n)) if index is None else list(index)
    if len(keys) != n:
        raise ValueError(f"{name}: {len(keys)} index entries for {n} rows")
    lows, highs = _bound_list(lower, n), _bound_list(upper, n)
    position = {key: i for i, key in enumerate(keys)}

    def rule(_: pyo.Block, *key: Any) -> Any:
        i = position[key[0] if len(key) == 1 else key]
        expr = exprs[i]
        if expr is None:
            lo, hi = lows[i], highs[i]
            if (lo is not None and lo > 0) or (hi is not None and hi < 0):
                raise ValueError(f"{name}[{keys[i]}] is empty but needs {lo} <= 0 <= {hi}")
            return pyo.Constraint.Skip
        return (lows[i], expr, highs[i])

    constraint = pyo.Constraint(keys if index is None or not isinstance(index, pyo.Set)
                                else index, rule=rule)
    model.add_component(name, constraint)
    return constraint


def add_expressions(
    model: pyo.Block,
    name: str,
    matrix: sp.csr_matrix | sp.csr_array,
    variables: Sequence[Any],
    *,
    index: Sequence[Any] | pyo.Set | None = None,
) -> pyo.Expression:
    """Add the indexed expression ``name[i] = (matrix @ variables)_i`` (0 for an empty row).
    Returns the expression component."""
    with _gc_manager.PauseGC():
        return _add_expressions(model, name, matrix, variables, index)


def _add_expressions(
    model: pyo.Block,
    name: str,
    matrix: sp.csr_matrix | sp.csr_array,
    variables: Sequence[Any],
    index: Sequence[Any] | pyo.Set | None,
) -> pyo.Expression:
    exprs = row_expressions(matrix, variables)
    keys = list(range(len(exprs))) if index is None else list(index)
    if len(keys) != len(exprs):
        raise ValueError(f"{name}: {len(keys)} index entries for {len(exprs)} rows")
    position = {key: i for i, key in enumerate(keys)}

    def rule(_: pyo.Block, *key: Any) -> Any:
        expr = exprs[position[key[0] if len(key) == 1 else key]]
        return 0.0 if expr is None else expr

    component = pyo.Expression(keys if index is None or not isinstance(index, pyo.Set)
                               else index, rule=rule)
    model.add_component(name, component)
    return component
