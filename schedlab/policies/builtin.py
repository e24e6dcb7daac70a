"""Registers the built-in heuristic policies (FIFO, SRTF, Tiresias, Gandiva, Themis, AlloX).

Importing this module registers every entry of :data:`BUILTIN_POLICIES` with
:func:`schedlab.policies.registry.register_policy` (idempotent: a name registered again is
replaced by the same entry).  Factories are ``"module:Class"`` strings, so registering imports
no policy module; a variant is a parameter of one class (``fifo_agnostic`` is
:class:`~schedlab.policies.fifo.Fifo` with ``heterogeneity_aware=False``).
"""

from __future__ import annotations

from typing import Any

from schedlab.policies.registry import register_policy

#: (name, "module:Class", description, default keyword arguments of the variant)
BUILTIN_POLICIES: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("fifo", "schedlab.policies.fifo:Fifo",
     "FIFO, non-preemptive, each job on its fastest type with room",
     {"heterogeneity_aware": True}),
    ("fifo_agnostic", "schedlab.policies.fifo:Fifo",
     "FIFO, non-preemptive, types in cluster order (type-blind)",
     {"heterogeneity_aware": False}),
    ("random", "schedlab.policies.fifo:RandomOrder",
     "random order every round from the run's seed (sanity baseline)", {}),
    ("srtf", "schedlab.policies.srtf:Srtf",
     "shortest remaining time first, preemptive, fastest type first",
     {"heterogeneity_aware": True}),
    ("srtf_agnostic", "schedlab.policies.srtf:Srtf",
     "shortest remaining time first, preemptive, types in cluster order",
     {"heterogeneity_aware": False}),
    ("tiresias", "schedlab.policies.tiresias:Tiresias",
     "Tiresias discretized 2D-LAS: queues by attained GPU-s, each kept as Tiresias keeps it",
     {"gittins": False}),
    ("tiresias_gittins", "schedlab.policies.tiresias:Tiresias",
     "Tiresias discretized 2D-Gittins: Gittins index within a queue",
     {"gittins": True}),
    ("gandiva", "schedlab.policies.gandiva:GandivaTimeSlicing",
     "Gandiva time-slicing (round-robin), packing, defragmenting migration", {}),
    ("gandiva_fair", "schedlab.policies.gandiva:GandivaFair",
     "Gandiva-fair: equal GPU-rounds per user (stride scheduling)", {}),
    ("themis", "schedlab.policies.themis:Themis",
     "Themis finish-time fairness: worst rho first, leases", {}),
    ("allox", "schedlab.policies.allox:AlloX",
     "AlloX: min total completion time matching, non-preemptive", {}),
)


def register_builtin_policies() -> None:
    """Register every entry of :data:`BUILTIN_POLICIES` (called on import)."""
    for name, factory, description, defaults in BUILTIN_POLICIES:
        register_policy(name, factory, description, **defaults)


register_builtin_policies()
