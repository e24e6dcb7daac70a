"""FIFO's queue between rounds on the simulator's columns: a round's work in its changes only.

The heterogeneity-aware FIFO (:class:`schedlab.policies.fifo.Fifo`) decides each round:

1. every job that ran in the previous round keeps its type (non-preemptive);
2. the waiting jobs, in arrival order, each start on the first type of its preference with
   ``scale_factor`` free GPUs (with backfill a job that does not fit is skipped, without it
   the walk stops there).

Done from scratch that reads every active job each round (``O(active)`` array work: ~660,000
jobs wait at 10^6 jobs).  :class:`FifoQueue` keeps what step 1 and 2 need between rounds of one
run instead:

* the *running* slots (ascending, as the active order is) with their types: the previous
  plan's, less the jobs that finished since (a slot no longer among ``ActiveArrays.rows``);
* the *waiting* slots by gang size, each list in slot order (admission order, which is
  (arrival, id) order when the caller has checked it), a job leaving its list when it starts
  (marked, and skipped from then on).

Step 2 then merges the lists of the sizes that can still fit, smallest slot first: the same
jobs in the same order as the full walk over the waiting jobs, without the jobs that the full
walk skips without effect -- a gang larger than the most free GPUs of any type (with
backfill) -- so a round costs O(running + jobs looked at + arrivals).  Without backfill every
size is merged (the walk stops at the first job that does not fit, whatever its size).

The caller (``Fifo._decide_arrays``) uses the queue only in the round right after the one it
planned, on the same columns, with arrivals in order and every running gang fitting its type
again; otherwise it decides from scratch and :meth:`FifoQueue.restart` builds the queue anew.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from schedlab.policies.state import ActiveArrays, Assignment, JobState

IntArray = npt.NDArray[np.int64]


class FifoQueue:
    """Running and waiting slots of one run between FIFO's rounds (module docstring)."""

    def __init__(self, arrays: ActiveArrays, total_slots: int) -> None:
        self.arrays = arrays
        self.round_index = -2  # the round whose plan ``running`` holds
        self.running = np.zeros(0, dtype=np.int64)  # slots, ascending
        self.running_types = np.zeros(0, dtype=np.int64)
        self.seen = -1  # the highest slot taken into the lists
        self.lists: dict[int, list[int]] = {}  # gang size -> waiting slots, ascending
        self.heads: dict[int, int] = {}  # gang size -> first position maybe still waiting
        self.left = np.zeros(total_slots, dtype=bool)  # by slot: started, out of the lists

    def restart(self, round_index: int, running: IntArray, running_types: IntArray,
                waiting: IntArray, seen: int) -> None:
        """Hold a plan made from scratch: ``running`` (the plan's slots, any order) with their
        types, ``waiting`` (every other active slot, ascending), ``seen`` the highest active
        slot."""
        order = np.argsort(running, kind="stable")
        self.round_index = round_index
        self.running = running[order]
        self.running_types = running_types[order]
        self.left[:] = False
        self.lists = {}
        self.heads = {}
        self._take_in(waiting)
        self.seen = seen

    def arrivals(self, rows: IntArray) -> IntArray:
        """The active slots above ``seen`` (jobs admitted since the last round), ascending."""
        return rows[int(np.searchsorted(rows, self.seen, side="right")):]

    def take_in(self, new: IntArray) -> None:
        """Admitted slots (ascending, above ``seen``) join the lists of their sizes."""
        if len(new):
            self._take_in(new)
            self.seen = int(new[-1])

    def _take_in(self, slots: IntArray) -> None:
        sizes = self.arrays.scale[slots]
        for size in np.unique(sizes).tolist():
            self.lists.setdefault(size, []).extend(slots[sizes == size].tolist())
            self.heads.setdefault(size, 0)

    def still_running(self, rows: IntArray) -> tuple[IntArray, IntArray]:
        """The previous plan's slots still active (ascending) and their types."""
        running = self.running
        if not len(running):
            return running, self.running_types
        finished = self.arrays.finished
        if finished is not None:
            alive = ~finished[running]
        elif len(rows):
            at = np.minimum(np.searchsorted(rows, running), len(rows) - 1)
            alive = rows[at] == running
        else:
            alive = np.zeros(len(running), dtype=bool)
        return running[alive], self.running_types[alive]

    def walk(self, free: dict[str, int], preference: Callable[[JobState], list[str]],
             job_of: Callable[[int], JobState], backfill: bool,
             ) -> tuple[list[Assignment], list[int]]:
        """Step 2 on the lists: (Assignments of the jobs started, their slots), in walk
        order; ``free`` (GPUs per type) is taken from.  ``job_of(slot)`` is the JobState of
        ``slot``, ``preference(job)`` the types to try for it, best first."""
        lists, heads, left = self.lists, self.heads, self.left
        started: list[Assignment] = []
        slots_started: list[int] = []
        most = max(free.values(), default=0)
        position: dict[int, int] = {}  # where this round's walk is in each list
        for size, waiting in lists.items():  # drop the started jobs at the front for good
            at = heads[size]
            while at < len(waiting) and left[waiting[at]]:
                at += 1
            heads[size] = position[size] = at
        while most > 0:
            best_slot = -1
            best_size = 0
            for size, waiting in lists.items():
                if backfill and size > most:
                    continue
                at = position[size]
                while at < len(waiting) and left[waiting[at]]:
                    at += 1
                position[size] = at
                if at < len(waiting) and (best_slot < 0 or waiting[at] < best_slot):
                    best_slot, best_size = waiting[at], size
            if best_slot < 0:
                break
            position[best_size] += 1
            if best_size > most:  # (without backfill) the first waiting job fits nowhere
                break
            chosen = None
            job = job_of(best_slot)
            for k in preference(job):
                if free.get(k, 0) >= best_size:
                    chosen = k
                    break
            if chosen is None:
                if not backfill:
                    break
                continue
            free[chosen] -= best_size
            left[best_slot] = True
            started.append(Assignment(job.id, chosen))
            slots_started.append(best_slot)
            most = max(free.values())
        for size, waiting in lists.items():  # a long list of started jobs: compact it
            if len(waiting) > 1024 and heads[size] > len(waiting) // 2:
                lists[size] = [s for s in waiting[heads[size]:] if not left[s]]
                heads[size] = 0
        return started, slots_started

    def hold(self, round_index: int, running: IntArray, running_types: IntArray,
             started: IntArray, started_types: IntArray) -> None:
        """The plan of ``round_index``: the running jobs kept, the ``started`` ones added."""
        self.round_index = round_index
        if len(started):
            slots = np.concatenate([running, started])
            kinds = np.concatenate([running_types, started_types])
            order = np.argsort(slots, kind="stable")
            self.running, self.running_types = slots[order], kinds[order]
        else:
            self.running, self.running_types = running, running_types
