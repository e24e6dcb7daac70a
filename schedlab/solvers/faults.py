"""Fault injection for tests: make the solvers fail on purpose, so that statuses, fallbacks
and failed-solve counters can be shown to react.  It lives here because it is the only place
allowed to touch a solver module directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import highspy


@contextmanager
def failing_highs() -> Iterator[list[int]]:
    """Inside the block every ``highspy.Highs.run`` solves nothing and the model status reads
    ``kSolveError`` (the solver failed); yields a one-element list counting the runs."""
    runs = [0]
    original_run = highspy.Highs.run
    original_status = highspy.Highs.getModelStatus

    def run(self: Any) -> Any:
        runs[0] += 1
        return highspy.HighsStatus.kError

    def status(self: Any) -> Any:
        return highspy.HighsModelStatus.kSolveError

    highspy.Highs.run = run  # type: ignore[method-assign]
    highspy.Highs.getModelStatus = status  # type: ignore[method-assign]
    try:
        yield runs
    finally:
        highspy.Highs.run = original_run  # type: ignore[method-assign]
        highspy.Highs.getModelStatus = original_status  # type: ignore[method-assign]
