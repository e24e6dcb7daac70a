"""Analysis: metrics, paper-style tables and plots built on formulations and simulations.

Modules: ``saturn_table`` (the Saturn comparison table behind ``schedlab tables saturn``),
``metrics``, ``sweep`` and ``plots`` (simulation results).  Nothing is imported here, so
importing one module does not pull in the others' dependencies.
"""
