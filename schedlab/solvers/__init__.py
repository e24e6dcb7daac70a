"""The one place that talks to Pyomo's solver plugins.  It knows no paper.

``solve_model(model, options)`` solves a Pyomo model once; :class:`PersistentSolver` keeps the
solver's copy of the model so iterative methods (bisection, cutting planes, water-filling)
re-solve after changing bounds, parameters or adding rows without rebuilding.
:func:`new_highs` makes a silent ``highspy.Highs`` (no banner) for direct highspy use.
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

__all__ = [
    "LpMethod",
    "PersistentSolver",
    "SolveResult",
    "SolverOptions",
    "available_solvers",
    "new_highs",
    "solve_model",
]
