"""Analysis: metrics, paper-style tables and plots built on formulations and simulations.

Modules: ``tables`` (one module per paper; ``tables.saturn`` is behind ``schedlab tables saturn``),
``metrics``, ``sweep`` and ``plots`` (simulation results).  Nothing is imported here, so
importing one module does not pull in the others' dependencies.
"""
