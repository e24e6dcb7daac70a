"""Pollux's goodput model (schedlab.world.goodput) at the parameters of the spec's test set:
every value derived by hand below (and equal to what the authors' code prints for them)."""

from __future__ import annotations

import math

import pytest

from schedlab.world.goodput import GoodputModel, GradParams, PerfParams

MODEL = GoodputModel(PerfParams(alpha_c=0.1, beta_c=0.01, alpha_n=0.5, beta_n=0.05,
                                alpha_r=0.2, beta_r=0.02, gamma=2.0),
                     GradParams(sqr=1.0, var=10.0), init_batch_size=128)
REL = 1e-9


def test_one_node_four_replicas_by_hand() -> None:
    # T_grad = 0.1 + 0.01 * 64 = 0.74; T_sync = 0.2 + 0.02 * 2 = 0.24;
    # T_iter = sqrt(0.74^2 + 0.24^2); M = 4 * 64 = 256
    t_iter = math.sqrt(0.74 ** 2 + 0.24 ** 2)
    assert MODEL.throughput(1, 4, 64, 0) == pytest.approx(256 / t_iter, rel=REL)
    # scale 2: gain = 11 / (10 / 2 + 1), efficiency = gain / 2
    assert MODEL.efficiency(256) == pytest.approx(11 / 6 / 2, rel=REL)
    assert MODEL.goodput(1, 4, 64, 0) == pytest.approx(256 / t_iter * 11 / 12, rel=REL)
    assert MODEL.throughput(1, 4, 64, 0) == pytest.approx(329.0716779065989, rel=REL)


def test_two_nodes_with_accumulation_by_hand() -> None:
    # T_sync = 0.5 + 0.05 * 6 = 0.8; T_iter = 0.74 + sqrt(0.74^2 + 0.8^2); M = 8*64*2
    t_iter = 0.74 + math.sqrt(0.74 ** 2 + 0.8 ** 2)
    assert MODEL.throughput(2, 8, 64, 1) == pytest.approx(1024 / t_iter, rel=REL)
    assert MODEL.efficiency(1024) == pytest.approx(11 / 2.25 / 8, rel=REL)
    assert MODEL.goodput(2, 8, 64, 1) == pytest.approx(341.997937664555, rel=REL)


def test_one_replica_syncs_in_1e_8_not_0() -> None:
    assert MODEL.sync_time(1, 1) == pytest.approx(1.00000001e-08, rel=1e-12)
    assert MODEL.throughput(1, 1, 128, 0) == pytest.approx(128 / 1.38, rel=REL)


@pytest.mark.parametrize(("nodes", "replicas", "goodput", "atomic"), [
    (1, 1, 92.753623, 128), (1, 2, 170.249997, 92), (1, 4, 302.685547, 75),
    (2, 8, 398.181429, 106), (4, 16, 480.768715, 106),
])
def test_optimize_picks_the_best_of_fifty_batch_sizes(nodes: int, replicas: int,
                                                      goodput: float, atomic: int) -> None:
    choice = MODEL.optimize(nodes, replicas, 4096, (32, 256))
    assert choice.goodput == pytest.approx(goodput, rel=1e-6)
    assert (choice.atomic_bsz, choice.accum_steps) == (atomic, 0)
    assert choice.goodput == pytest.approx(_best_by_hand(nodes, replicas), rel=1e-12)


def _best_by_hand(nodes: int, replicas: int) -> float:
    """The search of the module docstring in plain Python: 50 geometric batch sizes, the
    split, the formulas written out again, the best valid goodput."""
    low = max(128.0, 32.0 * replicas)
    best = 0.0
    for i in range(50):
        total = low * (4096.0 / low) ** (i / 49)
        local = total / replicas
        steps = math.ceil(local / 256 - 1e-8) - 1
        if replicas == 1 and local > 128 + 1e-8:
            steps = max(steps, 1)
        m = math.ceil(local / (steps + 1) - 1e-8)
        if not 32 <= m <= 256:
            continue
        grad = 0.1 + 0.01 * m
        k = max(replicas - 2, 1e-8)
        sync = (0.5 + 0.05 * k if nodes > 1 else 0.2 + 0.02 * k if replicas > 1
                else 1e-8 + 1e-8 * k)
        batch = replicas * m * (steps + 1)
        throughput = batch / (steps * grad + math.sqrt(grad ** 2 + sync ** 2))
        scale = batch / 128
        best = max(best, throughput * (11 / (10 / scale + 1)) / scale)
    return best


def test_without_batch_tuning_only_the_maximum_is_tried() -> None:
    # One replica, M = 1024: s = ceil(1024 / 256) - 1 = 3, m = 256; T_grad = 2.66,
    # T_iter = 3 * 2.66 + sqrt(2.66^2 + ~1e-16); efficiency(1024) = 11 / 2.25 / 8
    base = MODEL.optimize(1, 1, 1024, (32, 256), tune_bsz=False)
    assert (base.atomic_bsz, base.accum_steps) == (256, 3)
    assert base.goodput == pytest.approx(1024 / (4 * 2.66) * 11 / 2.25 / 8, rel=1e-9)
    assert base.goodput == pytest.approx(58.81370091896408, rel=REL)
    assert MODEL.optimize(1, 4, 1024, (32, 256), tune_bsz=False).goodput == pytest.approx(
        234.3030469, rel=1e-8)
