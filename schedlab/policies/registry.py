"""Name -> online policy, e.g. ``"fifo"``, ``"tiresias"``, ``"gavel.max_min_fairness"``.

The policy registry is a :class:`schedlab.registry.Registry` (the same mechanism as the
formulations'; its module docstring describes entries, variants, lazy ``"module:Class"``
factories and plug-ins).  Built-in names come from :mod:`schedlab.policies.builtin` (the
heuristics, and every Gavel formulation through the optimization adapter
:class:`schedlab.policies.gavel.GavelPolicy`); third-party packages add names through the
entry-point group ``schedlab.policies`` (docs/plugins.md).  A variant is a parameter of one
class::

    register_policy("fifo_agnostic", "schedlab.policies.fifo:Fifo",
                    "FIFO, type-blind", heterogeneity_aware=False)

:func:`get_policy` calls the factory with the registered defaults overridden by the caller's
keyword arguments and sets the policy's ``name`` to the registered name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schedlab.policies.base import Policy
from schedlab.registry import Entry, Registry

PolicyFactory = Callable[..., Policy]
#: A registered policy name (the registry's :class:`~schedlab.registry.Entry`).
PolicyEntry = Entry[Policy]

#: The policy registry (group ``schedlab.policies``).
POLICIES: Registry[Policy] = Registry(
    "policy", "schedlab.policies",
    builtins="schedlab.policies.builtin:register_builtin_policies",
    base=Policy,
    option="--policy",
)


def register_policy(
    name: str, factory: PolicyFactory | str, description: str = "", **defaults: Any
) -> None:
    """Register ``name`` -> ``factory(**defaults)`` (a later registration replaces it)."""
    POLICIES.register(name, factory, description, **defaults)


def policies() -> dict[str, PolicyEntry]:
    """All registered policies by name, sorted (built-ins and plug-ins)."""
    return POLICIES.entries()


def get_policy(name: str, **kwargs: Any) -> Policy:
    """A new policy registered as ``name``; an :class:`~schedlab.errors.UnknownNameError`
    (exit code 2) naming the known policies otherwise."""
    return POLICIES.get(name, **kwargs)
