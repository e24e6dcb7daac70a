"""schedlab: GPU-cluster scheduling formulations behind one Instance -> Solution interface.

The public names below are imported on first use (PEP 562), so ``import schedlab`` -- and
``schedlab --version``, ``--help``, ``validate`` and ``schema`` -- do not pay for Pyomo and
the solvers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schedlab.api import solve
    from schedlab.instance import Instance, load_instance
    from schedlab.solution import Solution, Status

__all__ = ["Instance", "Solution", "Status", "load_instance", "solve"]
__version__ = "0.1.0"

_WHERE = {"solve": "schedlab.api", "Instance": "schedlab.instance",
          "load_instance": "schedlab.instance", "Solution": "schedlab.solution",
          "Status": "schedlab.solution"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'schedlab' has no attribute {name!r}")
