"""The one place that talks to Pyomo's solver plugins.  It knows no paper.

``solve_model(model, options)`` solves a Pyomo model once; :class:`PersistentSolver` keeps the
solver's copy of the model so iterative methods (bisection, cutting planes, water-filling)
re-solve after changing bounds, parameters or adding rows without rebuilding.
:func:`matrix_model` makes a :class:`MatrixModel`, a persistent LP/MIP built and changed from
numpy arrays in the chosen solver (HiGHS or Gurobi), for code that works at matrix level.
:func:`new_highs` makes a silent ``highspy.Highs`` (no banner); only the HiGHS backend uses it.
"""

from schedlab.solvers.base import (
    LpMethod,
    PersistentSolver,
    SolveResult,
    SolverOptions,
    available_solvers,
    solve_model,
)
from schedlab.solvers.highs_quiet import new_highs
from schedlab.solvers.matrix import GurobiUnavailableError, MatrixModel, matrix_model

__all__ = [
    "GurobiUnavailableError",
    "LpMethod",
    "MatrixModel",
    "PersistentSolver",
    "SolveResult",
    "SolverOptions",
    "available_solvers",
    "matrix_model",
    "new_highs",
    "solve_model",
]
