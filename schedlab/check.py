"""Independent feasibility checker: Solution x Instance -> list of violated constraints.

Every constraint is re-derived from the Instance; the Pyomo model is never consulted.  Each
violation is one human-readable line with the numbers involved.  Tolerance ``tol`` is absolute
on shares and GPU counts.
"""

from __future__ import annotations

import math
from collections import defaultdict

from schedlab.instance import Instance
from schedlab.solution import Solution


def check(instance: Instance, solution: Solution, *, tol: float = 1e-6) -> list[str]:
    """All violations of ``solution`` against ``instance`` (empty list: feasible)."""
    violations: list[str] = []
    if solution.allocation or solution.colocated_allocation:
        violations += check_allocation(instance, solution, tol=tol)
    return violations


def check_allocation(instance: Instance, solution: Solution, *, tol: float = 1e-6) -> list[str]:
    """Time-share allocation X[j,k] (plus co-located pair shares Y[{j,j'},k]).

    * 0 <= X[j,k] <= 1, finite; job and accelerator exist;
    * X[j,k] > 0 only where the job has a throughput entry for k (it can run there);
    * per job: sum_k X[j,k] + sum_{pairs p containing j} sum_k Y[p,k] <= 1;
    * per type k: sum_j s_j X[j,k] + sum_p max(s_a, s_b) Y[p,k] <= n_k.
    """
    out: list[str] = []
    jobs = {job.id: job for job in instance.jobs}
    pools = instance.cluster.accelerators
    job_total: dict[str, float] = defaultdict(float)
    gpus_used: dict[str, float] = defaultdict(float)
    for job_id, shares in solution.allocation.items():
        job = jobs.get(job_id)
        if job is None:
            out.append(f"allocation names unknown job {job_id!r}")
            continue
        for acc, x in shares.items():
            if acc not in pools:
                out.append(f"job {job_id}: unknown accelerator {acc!r}")
                continue
            if not math.isfinite(x) or x < -tol or x > 1 + tol:
                out.append(f"job {job_id} on {acc}: share {x} outside [0, 1]")
                continue
            if x > tol and acc not in job.throughput:
                out.append(f"job {job_id} on {acc}: share {x:.6g} but no throughput there")
            job_total[job_id] += x
            gpus_used[acc] += job.scale_factor * x
    for pair in solution.colocated_allocation:
        a, b = pair.jobs
        y, acc = pair.fraction, pair.accelerator
        if a not in jobs or b not in jobs:
            out.append(f"co-located pair {a}+{b} names an unknown job")
            continue
        if acc not in pools:
            out.append(f"co-located pair {a}+{b}: unknown accelerator {acc!r}")
            continue
        if not math.isfinite(y) or y < -tol or y > 1 + tol:
            out.append(f"co-located pair {a}+{b} on {acc}: share {y} outside [0, 1]")
            continue
        coloc = (jobs[a].colocated_throughput or {}).get(b, {})
        if y > tol and acc not in coloc:
            out.append(f"co-located pair {a}+{b} on {acc}: share {y:.6g} but no co-location "
                       "throughput given")
        job_total[a] += y
        job_total[b] += y
        gpus_used[acc] += max(jobs[a].scale_factor, jobs[b].scale_factor) * y
    for job_id, total in job_total.items():
        if total > 1 + tol:
            out.append(f"job {job_id}: shares sum to {total:.9g} > 1")
    for acc, used in gpus_used.items():
        cap = pools[acc].count
        if used > cap + tol * max(1.0, cap):
            out.append(f"accelerator {acc}: {used:.9g} GPUs allocated > {cap} available")
    return out
