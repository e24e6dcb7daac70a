"""The replay worker's stop rule: how many steps still fit before a segment's wall end, and
how a gang spaces its agreements on that number (schedlab.executor.worker), by hand."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from schedlab.executor.worker import (
    FINAL_STRETCH,
    MAX_STRETCH,
    steps_that_fit,
    stretch,
)


def test_steps_that_fit_by_hand() -> None:
    # 1.0 s left at 0.3 s a step: 3 steps end at 0.9 (0.1 before), a 4th at 1.2 (0.2 after)
    assert steps_that_fit(100, end_wall=11.0, now=10.0, mean_step=0.3) == 3
    # 1.0 s left at 0.45 s a step: 2 steps end at 0.9 (0.1 before), a 3rd at 1.35 (after)
    assert steps_that_fit(100, end_wall=11.0, now=10.0, mean_step=0.45) == 2
    # the target caps it; a target reached or an end passed gives none
    assert steps_that_fit(2, end_wall=11.0, now=10.0, mean_step=0.3) == 2
    assert steps_that_fit(0, end_wall=11.0, now=10.0, mean_step=0.3) == 0
    assert steps_that_fit(5, end_wall=11.0, now=11.5, mean_step=0.3) == 0
    # a step ending 0.2 s after the end when 0.1 s are left: none
    assert steps_that_fit(5, end_wall=11.0, now=10.9, mean_step=0.3) == 0


def test_first_step_and_steps_mode() -> None:
    # before the first step the mean is unknown: one step, if the end is ahead
    assert steps_that_fit(50, end_wall=11.0, now=10.0, mean_step=0.0) == 1
    assert steps_that_fit(50, end_wall=11.0, now=11.0, mean_step=0.0) == 0
    # steps-budget mode (no wall end): the rest of the target at once
    assert steps_that_fit(50, end_wall=None, now=10.0, mean_step=0.3) == 50


def test_a_gang_decides_again_at_half_the_steps_that_fit() -> None:
    assert [stretch(n) for n in (1, FINAL_STRETCH)] == [1, FINAL_STRETCH]
    assert stretch(FINAL_STRETCH + 1) == (FINAL_STRETCH + 1) // 2
    assert stretch(100) == 50
    assert stretch(10_000) == MAX_STRETCH
    # the stretches of a segment with 1000 steps that fit, estimated exactly each time,
    # add up to all of them and end with the last few at once
    fit, stretches = 1000, []
    while fit > 0:
        stretches.append(stretch(fit))
        fit -= stretches[-1]
    assert sum(stretches) == 1000
    assert stretches[:1] == [MAX_STRETCH] and stretches[-1] <= FINAL_STRETCH
