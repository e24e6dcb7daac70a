"""HiGHS through Pyomo's persistent interface, plus MIP starts from current variable values.

Pyomo's ``pyomo.contrib.solver`` HiGHS interface does not pass a starting solution; this
subclass records the Pyomo variables as they are loaded and, when ``warm_start`` is on, hands
their current values to ``Highs.setSolution`` before each run (variables without a value
start at 0).  HiGHS checks the start and uses it as the first incumbent when it is feasible.

Quiet between solves: Pyomo captures HiGHS' console output only while it solves, so warnings
raised while it pushes changes to a loaded model (e.g. "|Value| of 0 supplied to
Highs::changeCoeff ...") would reach stdout.  The console log is therefore off outside solves.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pyomo.contrib.solver.solvers.highs import Highs

from schedlab.errors import SolverError


class WarmStartHighs(Highs):
    """Persistent HiGHS with optional MIP starts."""

    def __init__(self, **kwargs: Any) -> None:
        # Pyomo re-runs __init__ when it loads a new model (``_reinit``): keep the flag.
        warm = getattr(self, "warm_start", False)
        super().__init__(**kwargs)
        self.warm_start: bool = warm
        self._loaded_vars: dict[int, Any] = {}

    def set_instance(self, model: Any) -> None:
        super().set_instance(model)
        self._mute_console()

    def _mute_console(self) -> None:
        if self._solver_model is not None:
            self._solver_model.setOptionValue("log_to_console", False)
            self._make_interruptible()

    def _make_interruptible(self) -> None:
        """Pyomo calls ``self._solver_model.run()``: route it through
        :func:`~schedlab.solvers.interrupt.run_interruptibly` so Ctrl-C stops the solve."""
        model = self._solver_model
        if getattr(model, "_schedlab_interruptible", False):
            return
        from schedlab.solvers.interrupt import run_interruptibly

        plain = model.run
        model.run = lambda: run_interruptibly(model, plain)
        model._schedlab_interruptible = True

    def _add_variables(self, variables: list[Any]) -> None:
        super()._add_variables(variables)
        for v in variables:
            self._loaded_vars[id(v)] = v

    def _add_constraints(self, cons: list[Any]) -> None:
        """Pyomo's, then a check that HiGHS took every row: ``addRows`` refuses a block with
        a coefficient at or above its ``large_matrix_value`` (1e15) and Pyomo ignores the
        status, so the model would be solved without those rows (an LP read as unbounded)."""
        before = self._solver_model.getNumRow() if self._solver_model is not None else 0
        super()._add_constraints(cons)
        if self._solver_model is None:
            return
        added = self._solver_model.getNumRow() - before
        if added != len(cons):
            option = self._solver_model.getOptionValue("large_matrix_value")
            limit = option[1] if isinstance(option, tuple) else option
            raise SolverError(f"HiGHS refused {len(cons) - added} of {len(cons)} rows (it "
                              f"refuses coefficients of {limit:g} or more)")

    def _solve(self) -> Any:
        if self.warm_start and self._solver_model is not None:
            self._set_start()
        try:
            return super()._solve()
        finally:
            self._mute_console()

    def _set_start(self) -> None:
        import highspy

        columns = self._pyomo_var_to_solver_var_map
        values = np.zeros(len(columns))
        any_value = False
        for v_id, col in columns.items():
            var = self._loaded_vars.get(v_id)
            if var is not None and var.value is not None:
                values[col] = var.value
                any_value = True
        if not any_value:
            return
        start = highspy.HighsSolution()
        start.col_value = list(values)
        start.value_valid = True
        self._solver_model.setSolution(start)
