"""Compiled (numba) form of the one-node branch and bound of ``saturn_nodes._search``.

The same search, node for node: the serial schedule generation scheme with the same
children, the same order (bound, start, -GPU-seconds, job index), the same pruning and the same
memory of states seen (module docstring of ``saturn_nodes``).  Only the control flow differs:
an explicit stack instead of recursion, and fixed arrays instead of lists.  Python's
``_search`` stays the reference implementation; ``tests/test_saturn_nodes.py`` checks that both
visit the same number of nodes and return the same makespan.

A state seen before is found by an exact key (job set, last job, start time and the running
jobs' (time left, GPUs), times in whole microseconds), stored in a flat pool and found through
an open-addressing hash table; a hash collision only costs a key comparison, never a wrong
prune.

No clock is read inside the compiled loop (numba cannot): the caller checks its deadline
before the call, and ``node_limit`` bounds the work of one call (about 1-2 us per node).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: time comparisons are made with this slack (s), as in ``saturn_nodes``
EPS = 1e-6
#: ``search`` status codes
COMPLETE, ABORTED = 0, 1


@njit(cache=True)
def _micro(x: float) -> int:
    """``x`` (s) in whole microseconds (the memory key's resolution)."""
    return int(np.floor(x * 1e6 + 0.5))


@njit(cache=True)
def _bound(mask: int, t: float, n: int, capacity: int, gpus: np.ndarray, run: np.ndarray,
           big: np.ndarray, rs: np.ndarray, re: np.ndarray, rg: np.ndarray, k: int) -> float:
    """Lower bound of ``saturn_nodes._search.bound`` for the placed jobs (rs, re, rg)[:k]
    with last start ``t`` and the jobs outside ``mask`` left."""
    area_run = 0.0
    top = 0.0
    chain = t
    for p in range(k):
        e = re[p]
        if e > t:
            area_run += rg[p] * (e - max(rs[p], t))
        if e > top:
            top = e
        if 2 * rg[p] > capacity and e > chain:
            chain = e
    area_left = 0.0
    longest = 0.0
    big_left = 0.0
    for i in range(n):
        if not (mask >> i) & 1:
            area_left += gpus[i] * run[i]
            if run[i] > longest:
                longest = run[i]
            if big[i]:
                big_left += run[i]
    area = area_run + area_left
    return max(top, t + longest, t + area / capacity, chain + big_left)


@njit(cache=True)
def _hash(key: np.ndarray, length: int) -> np.int64:
    """FNV-1a style hash of ``key[:length]`` (int64)."""
    h = np.int64(1469598103934665603)
    for q in range(length):
        h = (h ^ np.int64(key[q])) * np.int64(1099511628211)
    return h


@njit(cache=True)
def _grown(values: np.ndarray, used: int) -> np.ndarray:
    """``values`` in an array twice as long (the first ``used`` entries kept)."""
    out = np.zeros(2 * values.shape[0], dtype=values.dtype)
    out[:used] = values[:used]
    return out


@njit(cache=True)
def _rehashed(e_hash: np.ndarray, entries: int, slots: int) -> np.ndarray:
    """An open-addressing table of ``slots`` (a power of two) holding entries 0..entries-1
    by their hashes."""
    table = np.full(slots, -1, dtype=np.int64)
    for ent in range(entries):
        slot = e_hash[ent] & (slots - 1)
        while table[slot] >= 0:
            slot = (slot + 1) & (slots - 1)
        table[slot] = ent
    return table


@njit(cache=True)
def search(gpus: np.ndarray, run: np.ndarray, twin_before: np.ndarray, capacity: int,
           upper: float, node_limit: int, first: bool,
           best_starts: np.ndarray) -> tuple[int, float, int, bool]:
    """Branch and bound over the jobs (``gpus``, ``run`` s; every g < capacity) with the
    incumbent ``upper``.  Returns (status, best makespan, nodes visited, found): status
    ``ABORTED`` when the node limit was hit or (``first``) a schedule shorter than ``upper``
    was found; ``found`` when ``best_starts`` holds a schedule shorter than ``upper``."""
    n = gpus.shape[0]
    full = (1 << n) - 1
    big = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        big[i] = 2 * gpus[i] > capacity
    depth_max = n + 1
    # per depth: the node's state, its placed jobs, its running jobs and its children
    d_mask = np.zeros(depth_max, dtype=np.int64)
    d_t = np.zeros(depth_max)
    d_last = np.zeros(depth_max, dtype=np.int64)
    p_s = np.zeros((depth_max, n + 1))
    p_e = np.zeros((depth_max, n + 1))
    p_g = np.zeros((depth_max, n + 1), dtype=np.int64)
    p_len = np.zeros(depth_max, dtype=np.int64)
    r_s = np.zeros((depth_max, n + 1))
    r_e = np.zeros((depth_max, n + 1))
    r_g = np.zeros((depth_max, n + 1), dtype=np.int64)
    r_len = np.zeros(depth_max, dtype=np.int64)
    c_lb = np.zeros((depth_max, n))
    c_s = np.zeros((depth_max, n))
    c_i = np.zeros((depth_max, n), dtype=np.int64)
    c_len = np.zeros(depth_max, dtype=np.int64)
    c_pos = np.zeros(depth_max, dtype=np.int64)
    starts = np.zeros(n)
    early = np.zeros(n)
    step_t = np.zeros(n + 2)
    step_used = np.zeros(n + 2, dtype=np.int64)
    order = np.zeros(n + 1, dtype=np.int64)
    key = np.zeros(3 + 2 * (n + 1), dtype=np.int64)
    # memory of states seen: an open-addressing table of entry numbers (-1: empty slot);
    # entry e's key is pool[e_off[e]:e_off[e] + e_len[e]], its hash e_hash[e]
    table = np.full(1 << 13, -1, dtype=np.int64)
    pool = np.zeros(1 << 16, dtype=np.int64)
    pool_used = 0
    e_off = np.zeros(1 << 12, dtype=np.int64)
    e_len = np.zeros(1 << 12, dtype=np.int64)
    e_hash = np.zeros(1 << 12, dtype=np.int64)
    entries = 0

    best = upper
    found = False
    count = 0
    d = 0
    d_mask[0] = 0
    d_t[0] = 0.0
    d_last[0] = -1
    p_len[0] = 0
    entering = True
    while d >= 0:
        if entering:
            entering = False
            count += 1
            if count > node_limit:
                return ABORTED, best, count, found
            mask = d_mask[d]
            t = d_t[d]
            c_len[d] = 0
            c_pos[d] = 0
            k = p_len[d]
            if mask == full:
                span = 0.0
                for p in range(k):
                    if p_e[d, p] > span:
                        span = p_e[d, p]
                if span < best - EPS:
                    best = span
                    best_starts[:] = starts
                    found = True
                if first:
                    return ABORTED, best, count, found
                d -= 1
                continue
            # running jobs: placed jobs still running after t
            m = 0
            in_use = 0
            for p in range(k):
                if p_e[d, p] > t + EPS:
                    r_s[d, m] = p_s[d, p]
                    r_e[d, m] = p_e[d, p]
                    r_g[d, m] = p_g[d, p]
                    in_use += p_g[d, p]
                    m += 1
            r_len[d] = m
            # running jobs sorted by (end, gpus): insertion sort of their indices
            for a in range(m):
                order[a] = a
            for a in range(1, m):
                b = order[a]
                q = a - 1
                while q >= 0 and (r_e[d, order[q]] > r_e[d, b] or (
                        r_e[d, order[q]] == r_e[d, b] and r_g[d, order[q]] > r_g[d, b])):
                    order[q + 1] = order[q]
                    q -= 1
                order[q + 1] = b
            # the memory key: mask, last, t, then (time left, gpus) of the running jobs in
            # (time left, gpus) order
            key[0] = mask
            key[1] = d_last[d]
            key[2] = _micro(t)
            for a in range(m):
                key[3 + 2 * a] = _micro(r_e[d, order[a]] - t)
                key[4 + 2 * a] = r_g[d, order[a]]
            for a in range(1, m):  # (microseconds, gpus) order, as the rounded values sort
                q = a
                while q > 0 and (key[1 + 2 * q] > key[3 + 2 * q] or (
                        key[1 + 2 * q] == key[3 + 2 * q] and key[2 + 2 * q] > key[4 + 2 * q])):
                    key[1 + 2 * q], key[3 + 2 * q] = key[3 + 2 * q], key[1 + 2 * q]
                    key[2 + 2 * q], key[4 + 2 * q] = key[4 + 2 * q], key[2 + 2 * q]
                    q -= 1
            length = 3 + 2 * m
            h = _hash(key, length)
            slots = table.shape[0]
            slot = h & (slots - 1)
            seen = False
            while table[slot] >= 0:
                ent = table[slot]
                if e_hash[ent] == h and e_len[ent] == length:
                    same = True
                    off = e_off[ent]
                    for q in range(length):
                        if pool[off + q] != key[q]:
                            same = False
                            break
                    if same:
                        seen = True
                        break
                slot = (slot + 1) & (slots - 1)
            if seen:
                d -= 1
                continue
            # remember the state (in the empty slot the probe ended at)
            if pool_used + length > pool.shape[0]:  # a key is far shorter than the pool
                pool = _grown(pool, pool_used)
            if entries == e_off.shape[0]:
                e_off = _grown(e_off, entries)
                e_len = _grown(e_len, entries)
                e_hash = _grown(e_hash, entries)
            pool[pool_used:pool_used + length] = key[:length]
            e_off[entries] = pool_used
            e_len[entries] = length
            e_hash[entries] = h
            table[slot] = entries
            entries += 1
            pool_used += length
            if 2 * entries > slots:  # keep the table at most half full
                table = _rehashed(e_hash, entries, 2 * slots)
            # GPUs in use after t only drop, at end times: earliest start of each job
            step_t[0] = t
            step_used[0] = in_use
            used = in_use
            for a in range(m):
                used -= r_g[d, order[a]]
                step_t[a + 1] = r_e[d, order[a]]
                step_used[a + 1] = used
            latest_end = -np.inf
            for i in range(n):
                if not (mask >> i) & 1:
                    for a in range(m + 1):
                        if step_used[a] + gpus[i] <= capacity:
                            early[i] = step_t[a]
                            break
                    if early[i] + run[i] > latest_end:
                        latest_end = early[i] + run[i]
            if latest_end >= best - EPS:
                d -= 1
                continue  # some job cannot end earlier, whatever comes next
            # children, in job order, then sorted by (bound, start, -GPU-seconds, job)
            nc = 0
            for i in range(n):
                if (mask >> i) & 1:
                    continue
                if twin_before[i] >= 0 and not (mask >> twin_before[i]) & 1:
                    continue
                s = early[i]
                if s <= t + EPS and i < d_last[d]:
                    continue
                r_s[d, m] = s
                r_e[d, m] = s + run[i]
                r_g[d, m] = gpus[i]
                lb = _bound(mask | (1 << i), s, n, capacity, gpus, run, big,
                            r_s[d], r_e[d], r_g[d], m + 1)
                if lb < best - EPS:
                    # insert in order (stable: equal keys keep job order)
                    a = nc
                    gr = -gpus[i] * run[i]
                    while a > 0:
                        j = c_i[d, a - 1]
                        pl, ps, pg = c_lb[d, a - 1], c_s[d, a - 1], -gpus[j] * run[j]
                        if pl > lb or (pl == lb and (ps > s or (ps == s and pg > gr))):
                            c_lb[d, a] = pl
                            c_s[d, a] = ps
                            c_i[d, a] = j
                            a -= 1
                        else:
                            break
                    c_lb[d, a] = lb
                    c_s[d, a] = s
                    c_i[d, a] = i
                    nc += 1
            c_len[d] = nc
        # next child of the node at depth d
        if c_pos[d] >= c_len[d]:
            d -= 1
            continue
        a = c_pos[d]
        c_pos[d] += 1
        if c_lb[d, a] >= best - EPS:
            continue
        i = c_i[d, a]
        s = c_s[d, a]
        starts[i] = s
        m = r_len[d]
        for p in range(m):
            p_s[d + 1, p] = r_s[d, p]
            p_e[d + 1, p] = r_e[d, p]
            p_g[d + 1, p] = r_g[d, p]
        p_s[d + 1, m] = s
        p_e[d + 1, m] = s + run[i]
        p_g[d + 1, m] = gpus[i]
        p_len[d + 1] = m + 1
        d_mask[d + 1] = d_mask[d] | (1 << i)
        d_t[d + 1] = s
        d_last[d + 1] = i
        d += 1
        entering = True
    return COMPLETE, best, count, found
