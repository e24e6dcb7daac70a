"""schedlab.fairness: both isolated references and their rho, on values derived by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from schedlab import fairness
from schedlab.formulations.gavel.data import gavel_data, isolated_throughput
from schedlab.instance import instance_from_dict


def test_isolated_share_is_one_mth_of_every_pool_capped_at_all_the_time() -> None:
    # 2 jobs, pools n = (2, 4): job 0 (s = 1) gets (2/2, 4/2) = (1, 2), sum 3 -> (1/3, 2/3);
    # job 1 (s = 2) gets (2/4, 4/4) = (0.5, 1), sum 1.5 -> (1/3, 2/3).
    share = fairness.isolated_share(np.array([2.0, 4.0]), np.array([1.0, 2.0]))
    assert share.ravel().tolist() == pytest.approx([1 / 3, 2 / 3, 1 / 3, 2 / 3], rel=1e-12)
    # 4 jobs of 1 GPU on the same pools: (2/4, 4/4) sums to 1.5 > 1 as well.
    assert fairness.isolated_share(np.array([2.0, 4.0]), np.ones(4)).sum(axis=1) == \
        pytest.approx(np.ones(4), rel=1e-12)
    assert fairness.isolated_share(np.array([2.0, 4.0]), np.zeros(0)).shape == (0, 2)


def test_isolated_throughput_counts_a_type_the_job_cannot_use_in_its_share() -> None:
    # T = [[3, 6], [0, 9]] with the shares above: 3/3 + 6 * 2/3 = 5 and 0 + 9 * 2/3 = 6.
    thr = fairness.isolated_throughput(np.array([[3.0, 6.0], [0.0, 9.0]]),
                                       np.array([2.0, 4.0]), np.array([1.0, 2.0]))
    assert thr.tolist() == pytest.approx([5.0, 6.0], rel=1e-12)


def test_gavel_data_reads_the_same_isolated_throughput() -> None:
    inst = instance_from_dict({
        "cluster": {"accelerators": {"k80": {"count": 2}, "v100": {"count": 4}}},
        "jobs": [{"id": "a", "total_steps": 10, "throughput": {"k80": 3, "v100": 6}},
                 {"id": "b", "scale_factor": 2, "total_steps": 10, "throughput": {"v100": 9}}],
    })
    assert isolated_throughput(gavel_data(inst)).tolist() == pytest.approx([5.0, 6.0], rel=1e-12)


def test_finish_times_and_rho_of_the_isolated_share() -> None:
    t = np.array([10.0, 10.0, 10.0])
    remaining = np.array([100.0, 0.0, 50.0])
    shared = fairness.shared_finish_time(t, remaining, np.array([10.0, 5.0, 0.0]))
    assert shared.tolist() == [20.0, 10.0, math.inf]  # 10 + 100/10; nothing left; no speed
    isolated = fairness.isolated_finish_time(np.array([5.0, 5.0, 5.0]), remaining,
                                             np.array([20.0, 1.0, 2.0]))
    assert isolated.tolist() == [10.0, 5.0, 30.0]  # 5 + 100/20; 5 + 0; 5 + 50/2
    rho = fairness.rho_isolated_share(t, remaining, np.array([10.0, 5.0, 0.0]), isolated)
    assert rho.tolist() == [2.0, 2.0, math.inf]
    no_share = fairness.isolated_finish_time(np.array([5.0]), np.array([10.0]), np.array([0.0]))
    assert no_share.tolist() == [math.inf]


def test_equal_share_contention_and_rho() -> None:
    assert fairness.equal_share_contention(10, 4) == 2.5  # 10 jobs on 4 GPUs
    assert fairness.equal_share_contention(2, 4) == 1.0  # fewer jobs than GPUs: no stretch
    assert fairness.equal_share_contention(10, 40, 8) == 2.0  # a gang of 8 in a share of 4
    assert fairness.equal_share_contention(np.array([2.0, 8.0]), 4).tolist() == [1.0, 2.0]
    assert fairness.exclusive_time(3600.0, 2.0) == 1800.0
    assert fairness.rho_equal_share(30.0, 5.0, 2.0) == 3.0
