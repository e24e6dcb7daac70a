"""The built-in policy names: the heuristics, and every Gavel formulation as a policy.

Three tables, registered by :func:`register_builtin_policies` when the policy registry is first
used (factories are ``"module:Class"`` strings, so registering imports no policy module):

* :data:`BUILTIN_POLICIES` -- the heuristic policies (FIFO, SRTF, Tiresias, Gandiva, Themis,
  AlloX, random), Shockwave's window planner and Titan's round ILP; a variant is a parameter
  of one class (``fifo_agnostic`` is :class:`~schedlab.policies.fifo.Fifo` with
  ``heterogeneity_aware=False``);
* every name of :data:`schedlab.formulations.builtin.GAVEL_FORMULATIONS` -- the optimization
  adapter :class:`~schedlab.policies.gavel.GavelPolicy` with ``formulation=<the name>``,
  except the names of :data:`GAVEL_POLICY_ALIASES`;
* :data:`GAVEL_POLICY_ALIASES` -- Gavel names whose online policy is a list policy of its own
  (the type-blind FIFO needs no LP; ``gavel.fifo_agnostic`` and ``fifo_agnostic`` are one
  implementation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schedlab.formulations.builtin import GAVEL_FORMULATIONS

if TYPE_CHECKING:
    from schedlab.registry import Registry

#: The Gavel optimization adapter every ``gavel.*`` formulation runs through.
GAVEL_ADAPTER = "schedlab.policies.gavel:GavelPolicy"

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
    ("tiresias_aware", "schedlab.policies.tiresias:Tiresias",
     "Tiresias 2D-LAS with each gang on its fastest type with room (heterogeneity-aware "
     "least attained service; needs no job length)",
     {"gittins": False, "heterogeneity_aware": True}),
    ("gandiva", "schedlab.policies.gandiva:GandivaTimeSlicing",
     "Gandiva time-slicing (round-robin), packing, defragmenting migration", {}),
    ("gandiva_fair", "schedlab.policies.gandiva:GandivaFair",
     "Gandiva-fair: equal GPU-rounds per user (stride scheduling)", {}),
    ("themis", "schedlab.policies.themis:Themis",
     "Themis finish-time fairness: worst rho first, leases", {}),
    ("allox", "schedlab.policies.allox:AlloX",
     "AlloX: min total completion time matching, non-preemptive", {}),
    ("shockwave", "schedlab.policies.shockwave:Shockwave",
     "Shockwave: Nash welfare of epoch progress over a 20-round window (the paper's MILP), "
     "finish-time targets, re-planned on arrivals, completions and every 8 rounds",
     {"mode": "integral"}),
    ("shockwave_convex", "schedlab.policies.shockwave:Shockwave",
     "Shockwave with the exact log (convex, solved exactly by water-filling), rounded gangs",
     {"mode": "convex"}),
    ("titan", "schedlab.policies.titan:Titan",
     "Titan: per-round ILP over elastic GPU counts and merges of similar never-started tasks, "
     "pipelined switch (elastic mode: schedlab.simulator.simulate_elastic)",
     {"merging": True, "pipelined_switch": True}),
    ("titan_no_merge", "schedlab.policies.titan:Titan",
     "Titan without the task merger (the ILP allocates GPUs only)",
     {"merging": False, "pipelined_switch": True}),
    ("titan_no_pipeline", "schedlab.policies.titan:Titan",
     "Titan without the pipelined switch (every reallocation pays the whole parameter load)",
     {"merging": True, "pipelined_switch": False}),
    ("titan_code_quirks", "schedlab.policies.titan:Titan",
     "Titan with TitanSched's merge quirks: a merged pair trains only its first member's "
     "work (the second rides free) and its GPU cap is the last pending task's",
     {"merging": True, "pipelined_switch": True, "code_quirks": True}),
)

#: Gavel formulations whose online policy is a list policy of its own, not the adapter:
#: name -> ("module:Class", description, default keyword arguments).
GAVEL_POLICY_ALIASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "gavel.fifo_agnostic": (
        "schedlab.policies.fifo:Fifo",
        "Gavel's FIFO: type-blind, arrival order, a job keeps its type, head-of-line blocking "
        "(same policy as fifo_agnostic)",
        {"heterogeneity_aware": False}),
    "gavel.fifo_agnostic_quirks": (
        "schedlab.policies.fifo:Fifo",
        "Gavel's FIFO as its code runs (gavel_code_quirks=True, Gavel's round mechanism): "
        "reproduces Gavel's published FIFO numbers",
        {"heterogeneity_aware": False, "gavel_code_quirks": True}),
}


def gavel_adapter_policies() -> tuple[tuple[str, str, str, dict[str, Any]], ...]:
    """One row per Gavel formulation run through :data:`GAVEL_ADAPTER` (the aliases left out),
    in the format of :data:`BUILTIN_POLICIES`."""
    return tuple(
        (name, GAVEL_ADAPTER, f"Gavel adapter: {description}", {"formulation": name})
        for name, _, description, _ in GAVEL_FORMULATIONS
        if name not in GAVEL_POLICY_ALIASES
    )


def register_builtin_policies(registry: Registry[Any]) -> None:
    """Register the three tables of the module docstring into ``registry``."""
    for name, factory, description, defaults in BUILTIN_POLICIES + gavel_adapter_policies():
        registry.register(name, factory, description, **defaults)
    for name, (factory, description, defaults) in GAVEL_POLICY_ALIASES.items():
        registry.register(name, factory, description, **defaults)
