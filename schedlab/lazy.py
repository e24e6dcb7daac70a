"""A module imported at its first attribute access, for heavy optional-path imports.

Pyomo and SciPy take about 0.6 s to import together (Pyomo's import hooks pull in
``scipy.stats`` once ``scipy.sparse`` loads).  The Gavel formulations build Pyomo models and
SciPy matrices, but the simulator's array path only reads their classes' attributes and
solves through the matrix layer, so a one-job ``schedlab simulate`` paid that second for
nothing.  The modules that build models name them as::

    if TYPE_CHECKING:
        import pyomo.environ as pyo
    else:
        pyo = LazyModule("pyomo.environ")

so type checkers see the module and the import happens at the first ``pyo.X`` that runs.

:func:`load_compiled` imports one of schedlab's numba modules, or says why it cannot.
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module ``name``; imports it at the first attribute read."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def load_compiled(name: str, what: str, instead: str) -> ModuleType | None:
    """The numba module ``name`` imported, or None with one warning (``what`` is unavailable,
    why; ``instead`` says what runs in its place): numba missing, or no writable cache
    directory for its compiled code.  The callers keep the answer, and run the same steps
    without numba when it is None."""
    try:
        return importlib.import_module(name)
    except (ImportError, RuntimeError, OSError) as exc:
        logging.getLogger(name).warning("%s is unavailable (%s); %s", what, exc, instead)
        return None
