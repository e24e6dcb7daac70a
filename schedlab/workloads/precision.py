"""The precision at which generated workloads state their derived numbers.

Generated numbers that come out of floating-point arithmetic (arrival times from summed gaps,
SLOs, co-location throughputs from an interference model) can differ in their last bit between
numpy / libm versions.  Generators round them to :data:`SIGNIFICANT_DIGITS` significant digits,
so the same call gives the same instance (and the same file) on any machine except in the rare
case where a value sits on a rounding boundary; tests compare regenerated data with a relative
tolerance of 1e-9 rather than bit for bit.  Step counts are whole numbers.
"""

from __future__ import annotations

import math

#: Significant decimal digits kept for derived floats in generated instances.
SIGNIFICANT_DIGITS = 12


def stated(value: float) -> float:
    """``value`` rounded to :data:`SIGNIFICANT_DIGITS` significant digits (0, inf, nan kept)."""
    if value == 0.0 or not math.isfinite(value):
        return float(value)
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def whole_steps(value: float) -> float:
    """A step count: ``value`` rounded to the nearest whole number, at least 1."""
    return float(max(1, round(value)))
