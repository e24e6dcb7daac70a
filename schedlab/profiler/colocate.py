"""Two jobs on one device at once (Gavel's space sharing): each one's steps/s while the other
runs.

Both jobs run in their own worker process (:mod:`schedlab.profiler.workers`) on the same
device: ``cuda:0`` on CUDA; on CPU "the same device" means the same cores, so both workers
are pinned to the core set of CPU device 0 (``threads`` cores, ``os.sched_setaffinity``
where the platform has it) and each uses ``threads`` torch threads.

Protocol.  Each worker builds its job and runs the warm-up steps; a barrier then starts both
timed phases together.  Each worker times its steps with the stopping rule of
:mod:`schedlab.profiler.timing`; a worker that has stopped keeps stepping, untimed, until the
other has stopped too, so every timed step of either job ran while the other job was
running.
"""

from __future__ import annotations

from typing import Any

from schedlab.profiler.matrix import ColocatedMeasurement, Settings
from schedlab.profiler.timing import summarize
from schedlab.profiler.workers import (
    DEFAULT_TIMEOUT_S,
    WorkerError,
    context,
    cpu_core_sets,
    run_workers,
)
from schedlab.profiler.zoo import JobSpec


def measure_colocated(first: JobSpec, second: JobSpec, device: str, backend: str, *,
                      settings: Settings, seed: int = 0, threads: int = 1,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> ColocatedMeasurement:
    """The colocated cell of ``first`` and ``second`` sharing one ``device``."""
    cell = ColocatedMeasurement(jobs=(first.name, second.name), device=device,
                                backend=backend)  # type: ignore[arg-type]
    if backend == "cuda":
        from schedlab.profiler.parallel import cuda_device_count

        if cuda_device_count() < 1:
            return cell.model_copy(update={"status": "infeasible",
                                           "reason": "no CUDA device visible"})
        cores = None
    else:
        sets = cpu_core_sets(1, threads)
        cores = sets[0] if sets else None
    ctx = context()
    start = ctx.Barrier(2)
    stopped = ctx.Value("i", 0)
    payloads = [{"job": spec.name, "backend": backend, "seed": seed + index,
                 "settings": settings.model_dump(), "threads": threads, "cores": cores,
                 "start": start, "stopped": stopped}
                for index, spec in enumerate((first, second))]
    try:
        answers = run_workers(colocated_worker, payloads, timeout_s=timeout_s)
    except WorkerError as exc:
        return cell.model_copy(update={"status": "error", "reason": str(exc)})
    summaries = [summarize(answer["durations_s"], settings.confidence, spec.batch_size)
                 for answer, spec in zip(answers, (first, second), strict=True)]
    ci_first, ci_second = (s.steps_per_s_ci for s in summaries)
    cis = (ci_first, ci_second) if ci_first is not None and ci_second is not None else None
    return cell.model_copy(update={
        "steps_per_s": (summaries[0].steps_per_s, summaries[1].steps_per_s),
        "steps_per_s_ci": cis})


def colocated_worker(payload: dict[str, Any]) -> dict[str, Any]:
    """Worker body of one of the two jobs (see the module docstring)."""
    from schedlab.profiler.timing import device_sync, time_steps
    from schedlab.profiler.workers import setup_worker
    from schedlab.profiler.zoo import TrainingJob, parse_job_name

    setup_worker(payload["threads"], payload["cores"])
    settings = Settings.model_validate(payload["settings"])
    device = "cuda:0" if payload["backend"] == "cuda" else "cpu"
    job = TrainingJob(parse_job_name(payload["job"]), seed=payload["seed"], device=device)
    sync = device_sync(device)
    for _ in range(settings.warmup_steps):
        job.step()
    if sync is not None:
        sync()
    payload["start"].wait()
    timing = time_steps(job.step, settings.model_copy(update={"warmup_steps": 0}), sync=sync)
    stopped = payload["stopped"]
    with stopped.get_lock():
        stopped.value += 1
    while stopped.value < 2:  # keep the device shared until the other job has stopped too
        job.step()
    return {"durations_s": list(timing.durations_s), "stopped_by": timing.stopped_by}
