"""Shockwave's remaining-time predictor: the code's formula transcribed here, hand examples
of the non-peeking variant, the oracle and d_j."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import InputError
from schedlab.formulations.shockwave.predictor import (
    remaining_seconds,
    seconds_per_epoch_estimate,
    whole_seconds,
)
from schedlab.instance import Job


def make_job(schedule: list[int], seconds: dict[int, float], done: int = 0) -> Job:
    return Job(id="j", epochs=len(schedule), epochs_done=done, batch_schedule=schedule,
               regimes={str(b): t for b, t in seconds.items()})


def code_transcription(schedule: list[int], seconds: dict[int, float], progress: int) -> float:
    """JobMetaData (Shockwave, scheduler/JobMetaData.py) as the code reads, line by line:
    metadata_bs_schedule, convert_epoch_duration_in_seconds, get_bs_epoch_duration_map and
    dirichlet_posterior_remaining_runtime with epoch_progress = progress, no measurements."""
    epochs = len(schedule)
    epoch_duration = [max(1.0, round(seconds[b])) for b in schedule]
    epoch_duration = [max(1.0, d / 1.0) for d in epoch_duration]  # overclock 1
    bs_modes = sorted(list(set(schedule)))
    prior = {bs: epochs / len(bs_modes) for bs in bs_modes}
    observed = schedule[: progress + 1]
    posterior = copy.deepcopy(prior)
    for bs in observed:
        posterior[bs] += 1
    concentration_sum = sum(list(posterior.values()))
    rebased = {bs: epochs * c / concentration_sum for bs, c in posterior.items()}
    for bs in observed:
        if rebased[bs] >= 1:
            rebased[bs] -= 1
    if len(rebased) <= 0:
        return 1.0
    inflated = int(sum(list(rebased.values())) + 1)
    remaining = epochs - progress
    if inflated < remaining:
        inflated = remaining
    if inflated <= 0 or remaining <= 0:
        return 1.0
    by_bs: dict[int, list[float]] = {}
    for i, d in enumerate(epoch_duration):
        by_bs.setdefault(schedule[i], []).append(d)
    means = {bs: np.mean(v) for bs, v in by_bs.items()}
    runtime = 0.0
    for bs in rebased:
        runtime += rebased[bs] * means[bs]
    runtime *= remaining / inflated
    runtime *= 1.0 + 1 * 0.0
    return runtime


@st.composite
def schedules(draw: st.DrawFn) -> tuple[list[int], dict[int, float], int]:
    sizes = draw(st.lists(st.sampled_from([16, 32, 64, 128, 256]), min_size=1, max_size=4,
                          unique=True))
    runs = draw(st.lists(st.tuples(st.sampled_from(sizes), st.integers(1, 40)), min_size=1,
                         max_size=6))
    schedule = [b for b, n in runs for _ in range(n)]
    seconds = {b: draw(st.floats(0.2, 500.0)) for b in set(schedule)}
    progress = draw(st.integers(0, len(schedule)))
    return schedule, seconds, progress


@settings(max_examples=300, deadline=None)
@given(schedules())
def test_default_equals_the_code_on_random_schedules(case: tuple) -> None:
    schedule, seconds, progress = case
    expected = code_transcription(schedule, seconds, progress)
    assert remaining_seconds(make_job(schedule, seconds), progress) == pytest.approx(
        expected, rel=1e-9)


def test_default_by_hand() -> None:
    # E = 6: three epochs of 32 (10 s), three of 64 (4 s); about to run epoch 2.
    # prior 3 + 3; observed 32, 32, 32 -> alpha = (6, 3), sum 9; beta = (4, 2); minus 3 -> (1, 2)
    # int(3 + 1) = 4 = E - e: factor 1; 1 x 10 + 2 x 4 = 18
    job = make_job([32, 32, 32, 64, 64, 64], {32: 10.0, 64: 4.0})
    assert remaining_seconds(job, 2) == pytest.approx(18.0, rel=1e-12)
    # E = 4 (32, 32, 32, 64), e = 3: alpha = (2+3, 2+1) = (5, 3), beta = (2.5, 1.5);
    # 32 can be subtracted twice (2.5 -> 0.5), 64 once (-> 0.5); int(1 + 1) = 2 > E - e = 1,
    # so (0.5 x 10 + 0.5 x 4) x 1/2 = 3.5
    job = make_job([32, 32, 32, 64], {32: 10.0, 64: 4.0})
    assert remaining_seconds(job, 3) == pytest.approx(3.5, rel=1e-12)
    assert remaining_seconds(job, 4) == 1.0  # nothing remains


def test_non_peeking_by_hand() -> None:
    # usable sizes 32 and 64 (regimes), E = 6, two epochs of 32 completed (e = 2):
    # prior 3 + 3; alpha = (5, 3), sum 8; beta = (3.75, 2.25); minus 2 -> (1.75, 2.25),
    # sum 4 = E - e, factor 1; mu_32 = 10 (run), mu_64 = 4 (profile):
    # 1.75 x 10 + 2.25 x 4 = 26.5
    job = make_job([32, 32, 32, 64, 64, 64], {32: 10.0, 64: 4.0})
    assert remaining_seconds(job, 2, mode="non_peeking") == pytest.approx(26.5, rel=1e-12)
    # the future schedule does not matter: an all-32 schedule, same regimes, same answer
    job = make_job([32] * 6, {32: 10.0, 64: 4.0})
    assert remaining_seconds(job, 2, mode="non_peeking") == pytest.approx(26.5, rel=1e-12)
    # before any epoch: beta = (3, 3), mu from the profile: 3 x 10 + 3 x 4 = 42
    assert remaining_seconds(job, 0, mode="non_peeking") == pytest.approx(42.0, rel=1e-12)
    assert remaining_seconds(job, 6, mode="non_peeking") == 1.0


def test_oracle_is_the_true_remaining_time() -> None:
    job = make_job([32, 32, 32, 64, 64, 64], {32: 9.6, 64: 4.5}, done=1)
    # whole seconds: 9.6 -> 10, 4.5 -> 4 (half to even)
    assert remaining_seconds(job, mode="oracle") == 2 * 10 + 3 * 4
    assert remaining_seconds(job, 6, mode="oracle") == 0
    assert remaining_seconds(job, 0, mode="oracle", rounded=False) == pytest.approx(
        3 * 9.6 + 3 * 4.5, rel=1e-12)


def test_whole_seconds() -> None:
    assert whole_seconds(np.array([0.3, 4.5, 5.5, 9.6])).tolist() == [1.0, 4.0, 6.0, 10.0]


def test_seconds_per_epoch_estimate() -> None:
    job = make_job([32, 32, 32, 64, 64, 64], {32: 10.0, 64: 4.0})
    assert seconds_per_epoch_estimate(job, 2) == 10.0  # mean(t0..t2)
    assert seconds_per_epoch_estimate(job, 3) == pytest.approx(8.5, rel=1e-12)  # t3 peeked
    assert seconds_per_epoch_estimate(job, 3, peek=False) == 10.0  # t0..t2 only
    assert seconds_per_epoch_estimate(job, 0, peek=False) == 10.0  # b0 from the profile
    assert seconds_per_epoch_estimate(job, 6) == pytest.approx(7.0, rel=1e-12)


@pytest.mark.parametrize(("job", "field"), [
    (Job(id="a", batch_schedule=[32], regimes={"32": 1.0}), "epochs"),
    (Job(id="a", epochs=2, regimes={"32": 1.0}), "batch_schedule"),
    (Job(id="a", epochs=2, batch_schedule=[32], regimes={"32": 1.0}), "batch_schedule"),
    (Job(id="a", epochs=1, batch_schedule=[32]), "regimes"),
    (Job(id="a", epochs=1, batch_schedule=[32], regimes={"64": 1.0}), "regimes"),
])
def test_missing_or_inconsistent_fields_are_named(job: Job, field: str) -> None:
    with pytest.raises(InputError) as info:
        remaining_seconds(job)
    assert info.value.field == field


def test_bad_progress_and_mode() -> None:
    job = make_job([32, 64], {32: 1.0, 64: 1.0})
    with pytest.raises(InputError) as info:
        remaining_seconds(job, 3)
    assert info.value.field == "epochs_done"
    with pytest.raises(InputError) as info:
        remaining_seconds(job, 0, mode="psychic")  # type: ignore[arg-type]
    assert info.value.field == "mode"
