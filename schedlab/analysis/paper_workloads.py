"""Titan's and Hare's generated workloads as job streams for the online simulator.

Sweeps (:class:`~schedlab.analysis.sweep.WorkloadSpec` with ``kind="titan"`` or
``kind="hare"``) run every policy on these streams with the ordinary simulator
(:func:`~schedlab.simulator.engine.simulate`), so a policy sees what it can use of them:

- **Titan** (:func:`~schedlab.workloads.titan.generate_titan_instance`): fine-tuning tasks
  on one accelerator type in nodes of 4 GPUs; the cluster must be a single type whose count
  is a multiple of 4.  ``num_jobs`` None: the generator's own count (about one task per GPU).
  Arrivals are spread over the generator's day; a rate rescales them to that mean rate
  (:func:`~schedlab.workloads.traces.rescale_arrivals`).  Rounds of 120 s (Titan's) unless
  the sweep gives a round length.
- **Hare** (:func:`~schedlab.workloads.hare.generate_hare_instance`): jobs of R_j rounds of
  m_j data-parallel tasks.  No rate: every job arrives at 0 s (Hare's batch); a rate:
  Poisson arrivals at that many jobs/hour.  The simulator runs each job as one gang of m_j
  GPUs (:func:`~schedlab.analysis.tables.hare.gang_instance`: ``total_steps`` = R_j rounds,
  throughput 1 / p[j,k] rounds/s on the types with room for the gang, switch cost the
  largest of the job's).  ``num_jobs`` None: 200 jobs (Hare's default).
"""

from __future__ import annotations

from collections.abc import Mapping

from schedlab.errors import InputError
from schedlab.instance import Instance

#: Jobs of a Hare stream when the sweep does not say.
HARE_DEFAULT_JOBS = 200


def titan_workload(num_jobs: int | None, cluster: Mapping[str, int], seed: int,
                   jobs_per_hour: float | None, round_s: float | None = None) -> Instance:
    """Titan's generator on ``cluster`` (one accelerator type), arrivals rescaled to
    ``jobs_per_hour`` when given."""
    from schedlab.workloads.titan import TITAN_ROUND_S, generate_titan_instance
    from schedlab.workloads.traces import rescale_arrivals

    pools = {acc: count for acc, count in cluster.items() if count > 0}
    if len(pools) != 1:
        raise InputError(f"a titan workload runs on one accelerator type, got "
                         f"{', '.join(sorted(pools)) or 'none'}", field="cluster")
    ((accelerator, gpus),) = pools.items()
    instance = generate_titan_instance(num_jobs, gpus=gpus, seed=seed, accelerator=accelerator,
                                       round_s=TITAN_ROUND_S if round_s is None else round_s)
    return instance if jobs_per_hour is None else rescale_arrivals(instance, jobs_per_hour)


def hare_workload(num_jobs: int | None, cluster: Mapping[str, int], seed: int,
                  jobs_per_hour: float | None, round_s: float | None = None) -> Instance:
    """Hare's generator on ``cluster`` as simulator gangs (module docstring)."""
    from schedlab.analysis.tables.hare import gang_instance
    from schedlab.workloads.hare import generate_hare_instance

    if jobs_per_hour is None:
        instance = generate_hare_instance(num_jobs or HARE_DEFAULT_JOBS, seed=seed,
                                          cluster=dict(cluster), arrivals="batch")
    else:
        instance = generate_hare_instance(num_jobs or HARE_DEFAULT_JOBS, seed=seed,
                                          cluster=dict(cluster), arrivals="poisson",
                                          jobs_per_hour=jobs_per_hour)
    return gang_instance(instance, round_s or instance.params.round_s)


__all__ = ["HARE_DEFAULT_JOBS", "hare_workload", "titan_workload"]
