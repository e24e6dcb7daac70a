"""Titan's speed model, merged durations and merge-benefit rule, by hand.

The similarity is injected (a lookup table written here), so these tests do not depend on
the concept hierarchy; the rule's use of the real hierarchy is tested in
tests/test_titan_check.py and tests/test_titan_cases.py.
"""

from __future__ import annotations

import math
import random

import pytest

from schedlab.formulations.titan.merge import (
    BENEFIT_THRESHOLD,
    JOINT_EPOCH_FACTOR,
    MergeRule,
    benefit_threshold,
    merge_benefit,
)
from schedlab.formulations.titan.speed import duration, duration_at, sum_profiles
from schedlab.formulations.titan.tasks import TitanTask


def task(name: str, profile: dict[int, float], **fields: object) -> TitanTask:
    defaults: dict[str, object] = {"base_model": "vit", "classes": ("cat",),
                                   "max_gpus": max(profile), "dataset": name}
    defaults.update(fields)
    return TitanTask(id=name, duration_s=profile, **defaults)  # type: ignore[arg-type]


# ------------------------------------------------------------------------- speed model


def test_interpolation_is_linear_in_inverse_gpus() -> None:
    # {1: 100, 4: 40}: at 2 GPUs 1/a = 1/2 lies 2/3 of the way from 1 to 1/4,
    # d = 100 + (40 - 100) 2/3 = 60
    assert duration({1: 100.0, 4: 40.0}, 2) == pytest.approx(60.0, rel=1e-12)
    # at 3 GPUs: (1/3 - 1) / (1/4 - 1) = 8/9, d = 100 - 60 * 8/9
    assert duration({1: 100.0, 4: 40.0}, 3) == pytest.approx(100 - 60 * 8 / 9, rel=1e-12)
    assert duration({1: 100.0, 4: 40.0}, 4) == 40.0


def test_flat_above_and_gpu_seconds_below_the_profile() -> None:
    assert duration({2: 50.0, 4: 30.0}, 16) == 30.0
    assert duration({4: 40.0}, 1) == pytest.approx(160.0, rel=1e-12)  # 4 x 40 GPU-seconds
    assert duration({4: 40.0}, 2) == pytest.approx(80.0, rel=1e-12)
    with pytest.raises(ValueError):
        duration({4: 40.0}, 0)


def test_perfect_scaling_is_exact_between_two_points() -> None:
    for a in (1, 2, 3, 5, 7, 8):
        assert duration({1: 96.0, 8: 12.0}, a) == pytest.approx(96.0 / a, rel=1e-12)


def test_sum_of_profiles_is_the_pointwise_sum() -> None:
    rng = random.Random(3)
    for _ in range(50):
        first = {c: rng.uniform(10, 100) for c in rng.sample([1, 2, 4, 8, 16], 2)}
        second = {c: rng.uniform(10, 100) for c in rng.sample([1, 2, 3, 8, 32], 3)}
        total = sum_profiles(first, second, 0.5)
        for a in range(1, 40):
            expected = 0.5 * (duration(first, a) + duration(second, a))
            assert duration(total, a) == pytest.approx(expected, rel=1e-9)


def test_duration_at_vectorized_matches_scalar() -> None:
    profile = {1: 90.0, 3: 40.0, 8: 25.0}
    values = duration_at(profile, [1, 2, 5, 9])
    assert list(values) == pytest.approx([duration(profile, a) for a in (1, 2, 5, 9)])


# ----------------------------------------------------------------------- benefit rule


@pytest.mark.parametrize(("a", "b", "merged", "ratio", "merge"), [
    (20, 20, 25, 60 / 50, True),      # seed case 1: 25 vs (20 + 40) / 2 = 30
    (10, 20, 21, 40 / 42, False),     # seed case 2: 21 vs (10 + 30) / 2 = 20
    (5, 100, 102, 110 / 204, False),  # seed case 3: 102 vs (5 + 105) / 2 = 55
])
def test_seed_case_table_by_the_benefit_rule_alone(a: float, b: float, merged: float,
                                                  ratio: float, merge: bool) -> None:
    beta = float(merge_benefit(a, b, merged))
    assert beta == pytest.approx(ratio, rel=1e-12)
    assert (beta >= BENEFIT_THRESHOLD) is merge


def test_row_rule_threshold() -> None:
    assert benefit_threshold(0) == 1.1
    assert benefit_threshold(9) == 1.1
    assert benefit_threshold(10) == pytest.approx(1.1)  # log10(10) + 0.1
    assert benefit_threshold(100) == pytest.approx(2.1)
    assert benefit_threshold(15) == pytest.approx(math.log10(15) + 0.1)


def test_default_merged_duration_is_the_seed_speed_up() -> None:
    a, b = task("a", {8: 20.0}), task("b", {8: 20.0})
    rule = MergeRule(similarity=lambda *_: 1.0)
    merged = rule.merged_profile(a, b)
    assert duration(merged, 8) == pytest.approx(40.0 / 1.55, rel=1e-12)
    # beta = (20 + 20 + 20) / (2 x 40 / 1.55) = 1.1625
    assert float(rule.benefit(a, b, [8])[0]) == pytest.approx(60 * 1.55 / 80, rel=1e-12)
    assert JOINT_EPOCH_FACTOR == pytest.approx(1 / 1.55)


def test_default_merged_duration_runs_at_the_first_members_speed() -> None:
    # work 1 and 3 units: M = phi (1 + 3/1) d_A = 4 phi d_A, whatever B's profile
    a = task("a", {1: 100.0, 4: 30.0}, work=1.0)
    b = task("b", {1: 999.0}, work=3.0)
    rule = MergeRule(joint_epoch_factor=0.5)
    merged = rule.merged_profile(a, b)
    assert duration(merged, 4) == pytest.approx(0.5 * 4 * 30.0, rel=1e-12)
    assert duration(merged, 1) == pytest.approx(0.5 * 4 * 100.0, rel=1e-12)


def test_entries_override_the_model() -> None:
    a, b = task("a", {8: 20.0}), task("b", {8: 20.0})
    measured = MergeRule(entries={frozenset({"a", "b"}): ({8: 25.0}, None)})
    assert duration(measured.merged_profile(a, b), 8) == 25.0
    factor = MergeRule(entries={frozenset({"a", "b"}): (None, 0.8)})
    assert duration(factor.merged_profile(a, b), 8) == pytest.approx(32.0, rel=1e-12)


def test_members_alone_are_capped_at_their_max_gpus() -> None:
    # a uses at most 2 GPUs: at 8 GPUs it still takes d_a(2) = 50
    a = task("a", {1: 100.0, 2: 50.0}, max_gpus=2)
    b = task("b", {8: 10.0})
    rule = MergeRule(entries={frozenset({"a", "b"}): ({8: 40.0}, None)})
    # (50 + 10 + 10) / (2 x 40)
    assert float(rule.benefit(a, b, [8])[0]) == pytest.approx(70 / 80, rel=1e-12)


# ---------------------------------------------------------------------------- the rule


def test_every_reason_is_given() -> None:
    similar = {("cat",), ("dog",)}

    def similarity(x: object, y: object, *_: object) -> float:
        return 0.9 if {tuple(x), tuple(y)} <= similar else 0.1  # type: ignore[arg-type]

    rule = MergeRule(threshold=0.5, similarity=similarity,
                     entries={frozenset({"a", "b"}): ({8: 25.0}, None),
                              frozenset({"a", "c"}): ({8: 25.0}, None)})
    a = task("a", {8: 20.0}, classes=("cat",))
    b = task("b", {8: 20.0}, classes=("dog",))
    assert rule.verdict(a, b, 8).may_merge
    assert rule.verdict(a, b, 8).similarity == 0.9
    car = task("c", {8: 20.0}, classes=("car",))
    (reason,) = rule.verdict(a, car, 8).reasons
    assert reason == "task similarity 0.1 < threshold 0.5"
    other = task("b", {8: 20.0}, classes=("dog",), base_model="roberta")
    assert "different base models (vit vs roberta)" in rule.verdict(a, other, 8).reasons
    started = task("b", {8: 20.0}, classes=("dog",), started=True)
    assert "task b has started" in rule.verdict(a, started, 8).reasons
    same = task("b", {8: 20.0}, classes=("dog",), dataset="a")
    assert "same dataset a" in rule.verdict(a, same, 8).reasons
    slow = MergeRule(similarity=similarity, entries={frozenset({"a", "b"}): ({8: 42.0}, None)})
    (reason,) = slow.verdict(a, b, 8).reasons
    # (20 + 20 + 20) / (2 x 42) = 0.714...; back to back (20 + 40) / 2 = 30
    assert reason == ("benefit 0.7143 < 1.1 at 8 GPUs (average JCT back to back shortest "
                      "first 30 s, merged 42 s)")


def test_similarity_is_computed_once_per_label_pair() -> None:
    calls: list[tuple[object, ...]] = []

    def similarity(*args: object) -> float:
        calls.append(args)
        return 1.0

    rule = MergeRule(similarity=similarity)
    a, b = task("a", {8: 20.0}), task("b", {8: 20.0}, classes=("dog",))
    for _ in range(3):
        rule.similarity_of(a, b)
        rule.similarity_of(b, a)
    assert len(calls) == 1
