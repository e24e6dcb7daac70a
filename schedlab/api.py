"""``schedlab.solve``: formulation name + Instance -> checked Solution."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from schedlab.check import check
from schedlab.errors import InputError
from schedlab.formulations.base import Formulation, ModelExtension
from schedlab.instance import Instance, load_instance
from schedlab.registry import get_formulation
from schedlab.solution import Solution
from schedlab.solvers import LpMethod, SolverOptions

log = logging.getLogger(__name__)


def solve(
    instance: Instance | str | Path,
    formulation: str,
    *,
    solver: str = "highs",
    time_limit: float | None = None,
    mip_gap: float | None = None,
    threads: int | None = None,
    lp_method: LpMethod = "auto",
    verbose: bool = False,
    run_check: bool = True,
    num_rounds: int | None = None,
    extend: Sequence[ModelExtension] = (),
) -> Solution:
    """Build, solve and extract ``formulation`` on ``instance``, then run the checker.

    ``num_rounds`` overrides ``instance.params.num_rounds`` for formulations that produce
    rounds (the instance, and so its hash, is left unchanged).  Violations found by
    :func:`schedlab.check.check` are stored in ``solution.violations`` and logged as errors:
    a formulation that produces one has a bug.

    ``extend``: functions ``fn(model, instance)`` that add the user's own constraints to every
    model the formulation solves (:meth:`~schedlab.formulations.base.Formulation.extend`);
    refused with an :class:`~schedlab.errors.InputError` by a heuristic or a method whose
    sub-models cannot carry them.  The checker knows only the instance's constraints.
    """
    inst = load_instance(instance) if isinstance(instance, str | Path) else instance
    form = get_formulation(formulation)
    if extend:
        if not isinstance(form, Formulation):
            raise InputError(f"{formulation} is a heuristic: it builds no model to extend",
                             field="extend")
        for extension in extend:
            form.extend(extension)
    if num_rounds is not None and hasattr(form, "num_rounds"):
        form.num_rounds = num_rounds
    options = SolverOptions(
        solver=solver,
        time_limit_s=time_limit if time_limit is not None else inst.params.time_limit_s,
        mip_gap=mip_gap if mip_gap is not None else inst.params.mip_gap,
        threads=threads,
        lp_method=lp_method,
        verbose=verbose,
    )
    solution = form.solve(inst, options)
    if run_check and solution.status.has_solution:
        t0 = time.perf_counter()
        solution.violations = check(inst, solution)
        solution.timings.check_s = time.perf_counter() - t0
        for v in solution.violations:
            log.error("checker: %s", v)
    return solution
