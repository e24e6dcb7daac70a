"""Sia's placer: the GPUs of one type handed to the jobs the ILP gave that type.

Written from the authors' code, read and run (siasosp23/artifacts at aaf7a0d,
``sia-simulator/sia.py`` ``alloc_to_placement_fast`` 149-204; the simulator uses it, with
``smart_placement = False``, 80).  Recomputed from the free GPUs every round (not sticky).

With R = the most free GPUs on any node (the node size when the type is empty) and a pointer
p at node 0, jobs in order of GPUs, descending (ties keep the given order):

1. a job of g >= R GPUs first takes floor(g / R) *completely free* nodes, scanning every node
   once from p onward (wrapping) -- a node that is not completely free is skipped;
2. then its remaining GPUs, node by node from where the scan stopped (wrapping), as many
   free GPUs of each node as it still needs;
3. p moves to the node after the last one visited -- also after a job that fitted in one
   node, so partial-node jobs are spread round-robin and packed only on wrap-around.

With Sia's configurations (powers of two inside a node, whole nodes above) no partial-node
job is split: every node's free GPUs stay a multiple of the current, non-increasing size.
The code loops forever when the jobs need more GPUs than are free; here that is a
ValueError (the ILP's capacity rows prevent it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def alloc_to_placement_fast(allocations: Mapping[str, tuple[int, int]],
                            free_gpus: Sequence[int]) -> dict[str, list[int]]:
    """The node index of every GPU of each job (module docstring).

    Args:
        allocations: job name -> (nodes, GPUs) on this type (the node count is not used,
            as in the code).
        free_gpus: free GPUs of each node of the type, in node order (not changed).

    Returns:
        job name -> node index per GPU, in the order the GPUs were taken; the jobs in the
        order of ``allocations``.
    """
    free = [int(g) for g in free_gpus]
    wanted = sum(int(g) for _, g in allocations.values())
    if wanted > sum(free):
        raise ValueError(f"the jobs need {wanted} GPUs but the nodes have {sum(free)} free")
    num_nodes = len(free)
    per_node = max(free, default=0)
    pointer = 0
    placed: dict[str, list[int]] = {}
    for name, (_, gpus) in sorted(allocations.items(), key=lambda item: item[1][1],
                                  reverse=True):
        node, need = pointer, int(gpus)
        taken: list[int] = []
        if need == 0:
            placed[name] = taken
            continue
        whole = need // per_node
        checked = 0
        while whole > 0 and checked < num_nodes:  # step 1: completely free nodes
            if free[node] == per_node:
                free[node] = 0
                need -= per_node
                taken.extend([node] * per_node)
                whole -= 1
            node = (node + 1) % num_nodes
            checked += 1
        while need > 0:  # step 2: any free GPUs
            take = min(need, free[node])
            if take:
                free[node] -= take
                need -= take
                taken.extend([node] * take)
            node = (node + 1) % num_nodes
        placed[name] = taken
        pointer = node
    return {name: placed[name] for name in allocations}


__all__ = ["alloc_to_placement_fast"]
