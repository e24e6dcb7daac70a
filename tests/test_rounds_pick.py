"""PriorityCandidates.pick's solo walk (two sorted parts, chunks, pruning) against the plain
rule: one stable lexsort by (-priority, -deficit), then a greedy pass over every candidate."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.formulations.gavel import rounds
from schedlab.formulations.gavel.rounds import PriorityCandidates


def plain_pick(cands: PriorityCandidates, received: np.ndarray, age: np.ndarray,
               gang: list[int], free: list[int], round_s: float,
               work_conserving: bool) -> list[int]:
    """The rule as written: keys, one lexsort, optional eligibility, a greedy pass."""
    share = cands.share
    neg_weighted = -share * age
    neg_priority = np.where(share > 0, -np.inf, 0.0)
    np.divide(neg_weighted, received, out=neg_priority, where=received > 0)
    order = np.lexsort((received + neg_weighted, neg_priority))
    if not work_conserving:
        eligible = (share > 0) & (received < share * (age + round_s)
                                  - rounds._ELIGIBLE_EPS * round_s)
        order = order[eligible[order]]
    left = list(free)
    placed: set[int] = set()
    chosen: list[int] = []
    for c in order.tolist():
        u = int(cands.unit[c])
        k = int(cands.acc[c])
        if u in placed or gang[u] > left[k]:
            continue
        placed.add(u)
        left[k] -= gang[u]
        chosen.append(c)
        if sum(left) < min(gang) or len(placed) == len(gang):
            break
    return chosen


@settings(max_examples=60, deadline=None)
@given(data=st.data(), units=st.integers(1, 60), num_types=st.integers(1, 3),
       work_conserving=st.booleans(), chunk=st.sampled_from([1, 3, 1024]))
def test_pick_equals_the_plain_rule(data: st.DataObject, units: int, num_types: int,
                                    work_conserving: bool, chunk: int) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    mask = rng.random((units, num_types)) < 0.8
    mask[np.arange(units), rng.integers(0, num_types, units)] = True
    unit, acc = np.nonzero(mask)
    share = np.where(rng.random(len(unit)) < 0.6, rng.random(len(unit)), 0.0)
    cands = PriorityCandidates(unit, acc, share, [unit], num_types, presorted=True)
    # the static order: a stable sort by -X (ties, zeros included, in candidate order)
    assert np.array_equal(cands.static, np.argsort(-share, kind="stable"))
    n = len(cands.unit)
    # received: 0 (nothing yet) for some, ties for others
    received = np.where(rng.random(n) < 0.3, 0.0, rng.choice([60.0, 120.0, 333.0], n))
    age = rng.choice([0.0, 360.0, 1000.0, 5000.0], n)
    gang = rng.choice([1, 1, 2, 4], units).tolist()
    free = rng.integers(0, 12, num_types).tolist()
    old = rounds._PICK_CHUNK
    rounds._PICK_CHUNK = chunk
    try:
        got = cands.pick(received, age, gang, free, round_s=360.0,
                         work_conserving=work_conserving)
    finally:
        rounds._PICK_CHUNK = old
    assert got == plain_pick(cands, received, age, gang, free, 360.0, work_conserving)
