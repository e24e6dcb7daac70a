"""PriorityCandidates.pick's solo walk (two sorted parts; one candidate at a time in chunks
with pruning, or the compiled loop) against the plain rule: one stable lexsort
by (-priority, -deficit), then a greedy pass over every candidate."""

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


@settings(max_examples=90, deadline=None)
@given(data=st.data(), units=st.integers(1, 60), num_types=st.integers(1, 3),
       work_conserving=st.booleans(), chunk=st.sampled_from([1, 3, 1024]),
       walk=st.sampled_from(["chunks", "compiled"]))
def test_pick_equals_the_plain_rule(data: st.DataObject, units: int, num_types: int,
                                    work_conserving: bool, chunk: int, walk: str) -> None:
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
    gang = rng.choice([1, 1, 2, 4, 8], units).tolist() if walk == "compiled" else gang
    old = (rounds._PICK_CHUNK, rounds._SORT_PIECE, rounds.COMPILED_WALK,
           rounds.COMPILED_WALK_MIN_UNITS)
    rounds._PICK_CHUNK = chunk
    rounds._SORT_PIECE = chunk  # the sort in pieces of 1, 3 (then doubling) or one piece
    # one candidate at a time in Python, or the compiled loop
    rounds.COMPILED_WALK = walk == "compiled"
    rounds.COMPILED_WALK_MIN_UNITS = 0
    try:
        got = cands.pick(received, age, gang, free, round_s=360.0,
                         work_conserving=work_conserving)
    finally:
        (rounds._PICK_CHUNK, rounds._SORT_PIECE, rounds.COMPILED_WALK,
         rounds.COMPILED_WALK_MIN_UNITS) = old
    assert got.tolist() == plain_pick(cands, received, age, gang, free, 360.0,
                                      work_conserving)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), units=st.integers(1, 80), num_types=st.integers(1, 3))
def test_share_ranks_give_the_stable_order_by_share(data: st.DataObject, units: int,
                                                    num_types: int) -> None:
    """With ranks of the shares' few distinct values (as a class LP knows them), the static
    order is the stable sort by -X, found by a radix sort of the ranks."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    mask = rng.random((units, num_types)) < 0.8
    mask[np.arange(units), rng.integers(0, num_types, units)] = True
    unit, acc = np.nonzero(mask)
    values = np.array([0.0, 0.125, 0.25, 1.0 / 3.0, 0.5])  # few values, many ties
    share = rng.choice(values, len(unit))
    # rank by hand: 0 for the largest value present, equal values equal ranks
    present = sorted(set(share.tolist()), reverse=True)
    rank = np.array([present.index(x) for x in share.tolist()], dtype=np.int64)
    cands = PriorityCandidates(unit, acc, share, [unit], num_types, presorted=True,
                               share_rank=rank)
    assert np.array_equal(cands.static, np.argsort(-share, kind="stable"))


@settings(max_examples=80, deadline=None)
@given(data=st.data(), n=st.integers(0, 300))
def test_two_key_sort_is_lexsort(data: st.DataObject, n: int) -> None:
    """rounds._lexsort2 is np.lexsort((secondary, primary)), ties, infinities, NaNs, -0.0
    and 0.0 included (up to 300 keys: beyond numpy's insertion sort of short arrays, its
    default sort does not keep ties in order)."""
    values = [0.0, -0.0, 1.0, -1.0, 2.5, float("inf"), float("-inf"), float("nan")]
    primary = np.array(data.draw(st.lists(st.sampled_from(values), min_size=n, max_size=n)))
    secondary = np.array(data.draw(st.lists(st.sampled_from(values), min_size=n,
                                            max_size=n)))
    assert np.array_equal(rounds._lexsort2(primary, secondary),
                          np.lexsort((secondary, primary)))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), units=st.integers(0, 120), num_types=st.integers(1, 3),
       num_classes=st.integers(1, 6))
def test_compiled_static_order_is_the_stable_sort_by_share(
        data: st.DataObject, units: int, num_types: int, num_classes: int) -> None:
    """walk_kernel.static_candidates (a counting sort of class-LP share ranks) gives the
    candidates of np.nonzero(runnable) in the order np.argsort(-X, kind="stable"), with
    X = the share of the row's class (as the adapter writes it per row) where above the
    minimum share, else 0."""
    walk_kernel = rounds._walk_kernel()
    if walk_kernel is None:
        return  # numba missing: the numpy path alone runs
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    slots = units + 5
    rows = rng.permutation(slots)[:units].astype(np.int64)
    runnable = rng.random((slots, num_types)) < 0.7
    values = np.array([0.0, 1e-9, 0.125, 0.25, 1.0 / 3.0, 0.5])  # ties; one below min
    per_class = rng.choice(values, (num_classes, num_types))
    row_class = rng.integers(0, num_classes, units)
    target = np.zeros((slots, num_types))
    target[rows] = per_class[row_class]
    min_share = 1e-6
    # ranks as the adapter makes them: 0 for the largest share, equal shares equal ranks
    class_share = np.where(per_class > min_share, per_class, 0.0)
    present = sorted(set(class_share.ravel().tolist()), reverse=True)
    class_rank = np.array([[present.index(x) for x in row] for row in class_share.tolist()],
                          dtype=np.int64).reshape(num_classes, num_types)
    arrival = rng.random(slots) * 100.0
    size = units * num_types
    out = [np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64), np.empty(size),
           np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64), np.empty(size)]
    count = walk_kernel.static_candidates(rows, runnable, per_class, row_class, min_share,
                                          class_rank, arrival, *out)
    unit, acc = np.nonzero(runnable[rows])
    share = np.where(target[rows[unit], acc] > min_share, target[rows[unit], acc], 0.0)
    static = np.argsort(-share, kind="stable")
    assert count == len(unit)
    got_unit, got_acc, got_share, got_static, got_flat, got_since = (a[:count] for a in out)
    assert np.array_equal(got_static, static)
    assert np.array_equal(got_unit, unit[static])
    assert np.array_equal(got_acc, acc[static])
    assert np.array_equal(got_share, share[static])
    assert np.array_equal(got_flat, rows[unit[static]] * num_types + acc[static])
    assert np.array_equal(got_since, arrival[rows[unit[static]]])
