r"""The placement step: turn a round's assignments (job -> accelerator type) into GPU ids.

A policy only says *which type* each gang runs on; the simulator chooses the concrete GPUs.
Gavel's round mechanism (:mod:`schedlab.formulations.gavel.rounds`) places with the same
rule, so it sits in the base layer, below both (docs/architecture.md, "Layers").
GPUs of a type are numbered 0..n_k-1.  When the pool is split into nodes (``gpus_per_node``
g, or ``count / nodes``), node i holds the ids i g .. i g + g - 1.

Per type, each round (the same rule as :mod:`schedlab.formulations.gavel.rounds`):

1. **Sticky.**  A gang that ran on this type the last time it ran keeps exactly the ids it
   held, when they are all free (so a job that keeps its type does not migrate, and a job that
   waited a round resumes on its old GPUs when nobody took them).
2. **Packed.**  The other gangs, largest first (ties keep the policy's order), take the ids of
   one node when some node has enough free GPUs (best fit: the node with the fewest free ids
   that still fits, then the lowest index), there the lowest run of consecutive free ids, else
   its lowest free ids.  A gang that fits in no node takes the nodes with the most free GPUs
   first (fewest nodes spanned).  Without nodes the pool is one node.

Free GPUs are held as a Python ``int`` bit mask per type (bit i set = GPU i free), so a
sticky check is one ``&`` and a placement a handful of integer operations: the placement of
a 1000-job trace costs well under a second in all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from schedlab.instance import AcceleratorPool, Cluster


@lru_cache(maxsize=65536)
def mask_ids(mask: int) -> tuple[int, ...]:
    """GPU ids of a bit mask, ascending: 0b1011 -> (0, 1, 3).  Cached (masks repeat); a run
    of consecutive ids at a time (a gang's GPUs are mostly one run): a few big-integer steps
    per run, not per id."""
    ids: list[int] = []
    base = 0
    while mask:
        low = (mask & -mask).bit_length() - 1  # the lowest set bit
        mask >>= low
        base += low
        length = (~mask & (mask + 1)).bit_length() - 1  # the run of ones from bit 0
        ids.extend(range(base, base + length))
        mask >>= length
        base += length
    return tuple(ids)


def ids_mask(ids: Sequence[int]) -> int:
    """Bit mask of GPU ids: (0, 1, 3) -> 0b1011."""
    mask = 0
    for i in ids:
        mask |= 1 << i
    return mask


def lowest_bits(mask: int, size: int) -> int:
    """The ``size`` lowest set bits of ``mask`` (``mask`` has at least that many)."""
    out = 0
    for _ in range(size):
        low = mask & -mask
        out |= low
        mask ^= low
    return out


def _lowest_run(mask: int, size: int) -> int:
    """The lowest run of ``size`` consecutive set bits of ``mask``, else its lowest bits.

    ``run`` keeps bit i set iff bits i .. i+have-1 of ``mask`` are all set; ``have`` grows by
    doubling (runs of ``have`` at i and at i+step, step <= have, cover i .. i+have+step-1),
    so a gang of s GPUs costs about log2(s) steps.
    """
    run = mask
    have = 1
    while have < size:
        step = have if have <= size - have else size - have
        run &= run >> step
        if not run:
            return lowest_bits(mask, size)
        have += step
    return ((1 << size) - 1) * (run & -run)


def gpus_per_node(pool: AcceleratorPool) -> int | None:
    """GPUs per node of a pool (``gpus_per_node``, or ``count / nodes`` when it divides)."""
    if pool.gpus_per_node is not None:
        return pool.gpus_per_node
    if pool.nodes is not None and pool.nodes > 0 and pool.count % pool.nodes == 0:
        return pool.count // pool.nodes
    return None


@dataclass
class PoolPlacer:
    """Placement on one accelerator pool of ``count`` GPUs in nodes of ``per_node`` GPUs."""

    count: int
    per_node: int | None = None

    def __post_init__(self) -> None:
        block = self.per_node or max(self.count, 1)
        self._nodes = [
            (start, ((1 << min(block, self.count - start)) - 1) << start)
            for start in range(0, max(self.count, 1), block)
        ]
        self.all_free = (1 << self.count) - 1

    @property
    def single_node(self) -> bool:
        """Whether the pool is one node (no ``per_node`` split)."""
        return len(self._nodes) == 1

    def take(self, free: int, size: int) -> int:
        """Mask of ``size`` free GPUs chosen by the packing rule (module docstring).

        ``free`` is the mask of free GPUs; raises ValueError when fewer than ``size`` are free.
        """
        if free.bit_count() < size:
            raise ValueError(f"{size} GPUs requested but only {free.bit_count()} free")
        if len(self._nodes) == 1:
            return _lowest_run(free, size)
        best: tuple[int, int] | None = None  # (free count, node mask)
        for _, node in self._nodes:
            have = (free & node).bit_count()
            if have >= size and (best is None or have < best[0]):
                best = (have, node)
        if best is not None:
            return _lowest_run(free & best[1], size)
        taken = 0
        by_room = sorted(self._nodes, key=lambda n: -(free & n[1]).bit_count())
        for _, node in by_room:
            need = size - taken.bit_count()
            if need == 0:
                break
            here = free & node
            taken |= lowest_bits(here, min(need, here.bit_count()))
        return taken

    def place(self, gangs: Sequence[int], previous: Sequence[int]) -> list[int]:
        """GPU masks for gangs of ``gangs[i]`` GPUs in the policy's order.

        ``previous[i]`` is the mask gang i held the last time it ran on this type (0: none).
        The total of ``gangs`` must not exceed ``count`` (the caller checked the decision).
        """
        return self.place_moved(gangs, previous)[0]

    def place_moved(self, gangs: Sequence[int], previous: Sequence[int]
                    ) -> tuple[list[int], list[int], int]:
        """:meth:`place`, the indices of the gangs that did not keep ``previous[i]`` (their
        mask differs from it: it had a GPU taken, or was 0), in the order placed, and the
        mask of the GPUs left free."""
        free = self.all_free
        masks: list[int] = []
        keep = masks.append
        rest: list[int] = []
        for size, prev in zip(gangs, previous, strict=True):
            if prev and (free & prev) == prev and prev.bit_count() == size:
                keep(prev)
                free ^= prev
            else:
                rest.append(len(masks))
                keep(0)
        if not rest:
            return masks, rest, free
        return masks, rest, self.place_rest(gangs, masks, rest, free)

    def place_rest(self, gangs: Sequence[int] | Mapping[int, int],
                   masks: list[int] | dict[int, int], rest: list[int], free: int) -> int:
        """The second step of :meth:`place`: gangs ``rest`` (indices in plan order, sorted
        here largest first, stably) get ``masks[i]`` by the packing rule from ``free``;
        returns the mask left free.  ``gangs[i]`` is gang i's size."""
        if len(rest) > 1:  # largest first; stable (also reversed): policy order within a size
            rest.sort(key=gangs.__getitem__, reverse=True)
        single = len(self._nodes) == 1
        for i in rest:
            size = gangs[i]
            if single and free.bit_count() >= size:  # take()'s rule for one node
                mask = _lowest_run(free, size)
            else:
                mask = self.take(free, size)
            masks[i] = mask
            free ^= mask
        return free


def cluster_placers(cluster: Cluster) -> dict[str, PoolPlacer]:
    """One :class:`PoolPlacer` per accelerator type of ``cluster``."""
    return {
        acc: PoolPlacer(pool.count, gpus_per_node(pool))
        for acc, pool in cluster.accelerators.items()
    }
