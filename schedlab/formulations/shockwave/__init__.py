"""Shockwave (NSDI'23): fair, efficient scheduling of jobs that adapt their batch size.

Shockwave plans a window of rounds ahead, maximizing a Nash social welfare of the jobs'
progress while bounding their predicted finish-time fairness; it predicts how long a job
whose batch size changes still has to run from a Dirichlet posterior over its batch-size
regimes.

Modules: ``predictor`` (the remaining-time predictor and the seconds-per-epoch estimate,
Shockwave's by default, with a non-peeking variant and the oracle) and ``nash`` (the window
problem ``shockwave.nash_welfare``: integral with the code's piecewise-linear log, or convex
with the exact log by outer approximation).  See docs/formulations/shockwave.md.
"""
