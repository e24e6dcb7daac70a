"""Name -> online policy, e.g. ``"fifo"``, ``"tiresias"``, ``"gavel.max_min_fairness"``.

A variant is a parameter of one class, so several names may share a factory with different
default keyword arguments::

    register_policy("fifo_agnostic", "schedlab.policies.fifo:Fifo",
                    "FIFO, type-blind", heterogeneity_aware=False)

A factory is a callable returning a :class:`~schedlab.policies.base.Policy`, or a string
``"module:attribute"`` imported on first use (so listing the names imports nothing and a
module that fails to import breaks only its own names).  :func:`get_policy` calls the factory
with the registered defaults overridden by the caller's keyword arguments and sets the
policy's ``name`` to the registered name.

Every Gavel formulation (``gavel.*``) is registered as a policy through the optimization
adapter :class:`schedlab.policies.gavel.GavelPolicy` (see that module).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schedlab.errors import UnknownNameError
from schedlab.policies.base import Policy

PolicyFactory = Callable[..., Policy]


@dataclass(frozen=True)
class PolicyEntry:
    """A registered policy name: its factory, description and default keyword arguments."""

    name: str
    factory: PolicyFactory | str
    description: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)

    def resolve(self) -> PolicyFactory:
        """The factory itself (imports ``"module:attribute"`` strings)."""
        if not isinstance(self.factory, str):
            return self.factory
        module_name, _, attribute = self.factory.partition(":")
        try:
            module = importlib.import_module(module_name)
            factory: PolicyFactory = getattr(module, attribute)
        except (ImportError, AttributeError) as exc:
            raise UnknownNameError(
                f"policy {self.name!r} is registered as {self.factory!r}, which cannot be "
                f"loaded: {exc}", field="--policy") from exc
        return factory

    def make(self, **overrides: Any) -> Policy:
        """A fresh policy with the registered defaults and ``overrides``."""
        policy = self.resolve()(**{**self.defaults, **overrides})
        policy.name = self.name
        return policy


_REGISTRY: dict[str, PolicyEntry] = {}

#: Modules that register policies when imported.
_POLICY_MODULES = ("schedlab.policies.gavel", "schedlab.policies.builtin")


def register_policy(
    name: str, factory: PolicyFactory | str, description: str = "", **defaults: Any
) -> None:
    """Register ``name`` -> ``factory(**defaults)`` (a later registration replaces it)."""
    if not name:
        raise ValueError("a policy needs a name")
    _REGISTRY[name] = PolicyEntry(name, factory, description, dict(defaults))


def _load() -> None:
    for module in _POLICY_MODULES:
        importlib.import_module(module)


def policies() -> dict[str, PolicyEntry]:
    """All registered policies by name, sorted."""
    _load()
    return dict(sorted(_REGISTRY.items()))


def get_policy(name: str, **kwargs: Any) -> Policy:
    """A new policy registered as ``name``; an :class:`~schedlab.errors.UnknownNameError`
    (exit code 2) naming the known policies otherwise."""
    _load()
    entry = _REGISTRY.get(name)
    if entry is None:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownNameError(f"unknown policy {name!r} (known: {known})", field="--policy")
    return entry.make(**kwargs)


# ------------------------------------------------------------------ heuristic policies
# One line per name: register_policy(name, "schedlab.policies.<module>:<Class>", description,
# **variant_defaults).  (Gavel's optimization policies register themselves from
# schedlab.policies.gavel, one per Gavel formulation.)
