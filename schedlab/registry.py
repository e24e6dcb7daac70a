"""Name -> formulation lookup, e.g. ``"gavel.max_min_fairness"``.

A variant is a parameter of one class, so several names may map to the same class with
different keyword arguments (``gavel.max_min_fairness_agnostic`` is ``MaxMinFairness`` with
``heterogeneity_aware=False``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from schedlab.errors import UnknownNameError
from schedlab.formulations.base import Formulation

#: Modules that register formulations when imported.
_FORMULATION_MODULES = (
    "schedlab.formulations.gavel.models",
    "schedlab.formulations.gavel.hierarchical",
    "schedlab.formulations.saturn.models",
    "schedlab.formulations.saturn.baselines",
    "schedlab.formulations.saturn.introspective",
)


@dataclass(frozen=True)
class Entry:
    """A registered name: the class and the keyword arguments that make the variant."""

    name: str
    cls: type[Formulation]
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    def make(self, **overrides: Any) -> Formulation:
        """Instantiate the formulation with the variant's kwargs and any overrides."""
        formulation = self.cls(**{**self.kwargs, **overrides})
        formulation.name = self.name
        return formulation


_REGISTRY: dict[str, Entry] = {}


def register(name: str, cls: type[Formulation], description: str = "", **kwargs: Any) -> None:
    """Register ``name`` -> ``cls(**kwargs)``."""
    _REGISTRY[name] = Entry(name, cls, kwargs, description or cls.description)


def _load() -> None:
    for module in _FORMULATION_MODULES:
        importlib.import_module(module)


def formulations() -> dict[str, Entry]:
    """All registered formulations by name, sorted."""
    _load()
    return dict(sorted(_REGISTRY.items()))


def get_formulation(name: str, **overrides: Any) -> Formulation:
    """The formulation registered as ``name``; a clear error naming the known ones otherwise."""
    _load()
    entry = _REGISTRY.get(name)
    if entry is None:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownNameError(f"unknown formulation {name!r} (known: {known})",
                               field="--formulation")
    return entry.make(**overrides)
