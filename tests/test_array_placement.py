"""The array engine's placement (schedlab.simulator.array_placement) against the rule as
written, :meth:`PoolPlacer.place_moved`, round after round: random plans (subsets of the
jobs in random order on random types) over pools with and without nodes, with gangs that
resume on their old GPUs, lose them to an older gang, or find no run of their size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.placement import PoolPlacer
from schedlab.simulator import array_placement
from schedlab.simulator.array_placement import Placement


@pytest.mark.parametrize("compiled", [True, False])
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 25),
       per_node=st.sampled_from([None, None, 4, 8]), run_min_gpus=st.sampled_from([0, 20]),
       few=st.sampled_from([16, 0]))
def test_placement_equals_the_written_rule(compiled: bool, seed: int, rounds: int,
                                           per_node: int | None, run_min_gpus: int,
                                           few: int) -> None:
    """``compiled``: one-node pools by the compiled loops or by numpy operations; ``few``:
    up to this many gangs to move are placed by the rule as written (0: none, so every
    round's moves go through the size-by-size placement)."""
    if compiled:
        pytest.importorskip("numba")
    old = (array_placement.COMPILED_PLACEMENT, array_placement._FEW)
    array_placement.COMPILED_PLACEMENT, array_placement._FEW = compiled, few
    try:
        _placement_rounds(seed, rounds, per_node, run_min_gpus)
    finally:
        array_placement.COMPILED_PLACEMENT, array_placement._FEW = old


def _placement_rounds(seed: int, rounds: int, per_node: int | None, run_min_gpus: int) -> None:
    rng = np.random.default_rng(seed)
    types = ["a", "b"]
    counts = [int(rng.integers(1, 40)), int(rng.integers(1, 12))]
    placers = {k: PoolPlacer(n, per_node) for k, n in zip(types, counts, strict=True)}
    num_jobs = int(rng.integers(1, 30))
    scale = rng.choice([1, 1, 1, 2, 3, 4, 8], num_jobs)
    last_type = np.full(num_jobs, -1, dtype=np.int64)
    mask = np.zeros(num_jobs, dtype=object)  # the GPUs each job held the last time it ran
    placement = Placement(types, placers, last_type, mask, run_min_gpus=run_min_gpus)
    for slot in range(num_jobs):
        placement.admit(slot, int(scale[slot]))
    for _ in range(rounds):
        order = rng.permutation(num_jobs)[:int(rng.integers(0, num_jobs + 1))]
        groups: list[list[int]] = [[], []]
        used = [0, 0]
        for slot in order.tolist():
            k = int(rng.integers(0, 2))
            if used[k] + scale[slot] <= counts[k]:
                groups[k].append(slot)
                used[k] += int(scale[slot])
        # the rule as written, per type: previous = the mask held there the last time
        expected = {}
        for k, slots in enumerate(groups):
            if slots:
                previous = [mask[s] if last_type[s] == k else 0 for s in slots]
                masks, moved, _ = placers[types[k]].place_moved(
                    [int(scale[s]) for s in slots], previous)
                expected[k] = (masks, sorted(moved))
        got = {}
        for _, k, slots, masks, moved, _ in placement.layout(groups):
            if masks is None:  # described only: the moved gangs' masks from the descriptions
                masks = {i: placement.mask_of(slots[i]) for i in moved}
            if isinstance(masks, dict):  # the moved gangs' masks only; the others keep theirs
                assert sorted(masks) == moved
                masks = [masks[i] if i in masks else mask[s] for i, s in enumerate(slots)]
            got[k] = (masks, moved)
        assert got == expected
        for k, slots in enumerate(groups):  # the round ran: what the engine then records
            if slots:
                masks, _ = got[k]
                for s, m in zip(slots, masks, strict=True):
                    assert m.bit_count() == scale[s]
                    mask[s] = m
                    last_type[s] = k
        # the masks of one type are disjoint
        for k in got:
            masks = got[k][0]
            assert sum(m.bit_count() for m in masks) == (
                np.bitwise_or.reduce(np.array(masks, dtype=object)).bit_count())
