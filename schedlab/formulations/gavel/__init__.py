"""Gavel (Narayanan et al., OSDI 2020): heterogeneity-aware allocation policies.

Modules: ``data`` (the arrays every policy reads), ``base`` (the shared model and the
formulation base class), ``models`` (the policies), ``fast`` (exact fast paths for large
instances), ``hierarchical`` (water-filling over entities), ``rounds`` (Gavel's round-based
mechanism that turns an allocation into per-round placements).
"""
