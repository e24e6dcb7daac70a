"""Data-parallel scale factors and Saturn's technique search, measured in worker processes.

A job on ``scale_factor`` = ``s`` devices runs in ``s`` worker processes
(:mod:`schedlab.profiler.workers`), one per device, each training :class:`TrainingJob` with
``batch_size`` samples per process:

* ``single`` (s = 1): the plain job, no process group.
* ``ddp``: ``torch.nn.parallel.DistributedDataParallel`` over a process group (gloo on CPU,
  NCCL on CUDA) that meets at ``tcp://127.0.0.1:<free port>``; gradients are all-reduced in
  the backward pass, so the ranks step together.
* ``fsdp``: ``torch.distributed.fsdp.fully_shard`` on each top-level stage of the model
  (:func:`schedlab.profiler.zoo.stages`) and on the model, over a one-dimensional device mesh;
  parameters, gradients and optimizer state are sharded.  It runs on CPU with gloo under
  torch 2.13; where it does not, the cell is ``infeasible`` with the exception's message.

Timing a global step.  Every rank runs the stopping rule of :mod:`schedlab.profiler.timing`,
but rank 0 decides: after each step its decision is broadcast (outside the timed interval),
which also lines the ranks up before the next step, and rank 0's step times are reported.
Steps/s counts global steps of ``batch_size x s`` samples; peak memory is rank 0's.
Technique cells (Saturn) record the mean seconds per global step of each technique on
``gpus`` devices: ``single`` on one device, ``ddp`` and ``fsdp`` on two or more.

Busy neighbours (``Settings.busy_neighbours``, ``schedlab profile --busy-neighbours``).  On
CPU, every CPU device the cell does not use runs the same job, untimed, in a worker of its
own (:func:`busy_neighbour`, pinned to that device's cores) from before the cell's workers
start until they have answered.  The cell is then timed under the conditions of a replay or
a cluster that keeps every device busy (shared caches, memory bandwidth and the scheduler's
placement of other programs), not on an otherwise idle machine.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

from schedlab.profiler.matrix import Measurement, Settings, TechniqueMeasurement
from schedlab.profiler.timing import StopReason, Summary, summarize
from schedlab.profiler.workers import (
    DEFAULT_TIMEOUT_S,
    WorkerError,
    context,
    cpu_core_sets,
    free_port,
    run_workers,
)
from schedlab.profiler.zoo import JobSpec

log = logging.getLogger(__name__)

#: techniques of Saturn's search measured for one device and for two or more
TECHNIQUES_ONE_DEVICE: tuple[str, ...] = ("single",)
TECHNIQUES_MANY_DEVICES: tuple[str, ...] = ("ddp", "fsdp")

_STOP_CODES: tuple[StopReason | None, ...] = (None, "precision", "max_steps", "max_seconds")


class Infeasible(Exception):
    """The measurement cannot run here (e.g. not enough CUDA devices); the reason."""


def cuda_device_count() -> int:
    """CUDA devices torch can see (0 without CUDA)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def group_payloads(spec: JobSpec, backend: str, technique: str, world: int, *,
                   settings: Settings, seed: int, threads: int) -> list[dict[str, Any]]:
    """One worker payload per rank; raises :class:`Infeasible` when the devices are missing."""
    if backend == "cuda":
        found = cuda_device_count()
        if found < world:
            raise Infeasible(f"{world} CUDA device(s) needed, {found} visible")
        cores: list[list[int]] | None = None
    else:
        cores = cpu_core_sets(world, threads)
    port = free_port() if world > 1 else 0
    return [{"job": spec.name, "backend": backend, "technique": technique, "rank": rank,
             "world": world, "port": port, "settings": settings.model_dump(), "seed": seed,
             "threads": threads, "cores": cores[rank] if cores else None}
            for rank in range(world)]


def measure_group(spec: JobSpec, backend: str, technique: str, world: int, *,
                  settings: Settings, seed: int, threads: int,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[Summary, int]:
    """Rank 0's step-time summary and peak memory of ``technique`` on ``world`` devices."""
    payloads = group_payloads(spec, backend, technique, world, settings=settings, seed=seed,
                              threads=threads)
    neighbours = _start_neighbours(spec, world, seed, threads) \
        if backend == "cpu" and settings.busy_neighbours else None
    try:
        answers = run_workers(group_worker, payloads, timeout_s=timeout_s)
    finally:
        if neighbours is not None:
            _stop_neighbours(*neighbours)
    rank0 = answers[0]
    summary = summarize(rank0["durations_s"], settings.confidence, spec.batch_size * world)
    return summary, int(rank0["peak_memory_bytes"])


def measure_scale_factor(spec: JobSpec, device: str, backend: str, scale_factor: int, *,
                         settings: Settings, seed: int = 0, threads: int = 1,
                         timeout_s: float = DEFAULT_TIMEOUT_S) -> Measurement:
    """The solo (s = 1) or DDP (s > 1) cell of ``spec`` on ``scale_factor`` x ``device``."""
    cell = Measurement(job=spec.name, device=device, backend=backend,  # type: ignore[arg-type]
                       scale_factor=scale_factor)
    technique = "single" if scale_factor == 1 else "ddp"
    try:
        summary, peak = measure_group(spec, backend, technique, scale_factor,
                                      settings=settings, seed=seed, threads=threads,
                                      timeout_s=timeout_s)
    except Infeasible as exc:
        return cell.model_copy(update={"status": "infeasible", "reason": str(exc)})
    except WorkerError as exc:
        return cell.model_copy(update={"status": "error", "reason": str(exc)})
    return cell.model_copy(update={
        "steps_per_s": summary.steps_per_s, "steps_per_s_ci": summary.steps_per_s_ci,
        "samples_per_s": summary.samples_per_s, "steps_timed": summary.steps_timed,
        "peak_memory_bytes": peak})


def measure_technique(spec: JobSpec, device: str, backend: str, technique: str, gpus: int,
                      *, settings: Settings, seed: int = 0, threads: int = 1,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> TechniqueMeasurement:
    """Saturn's technique cell: seconds per global step of ``technique`` on ``gpus`` devices,
    ``infeasible`` with the reason when the technique cannot run here."""
    cell = TechniqueMeasurement(job=spec.name, device=device,
                                backend=backend,  # type: ignore[arg-type]
                                technique=technique, gpus=gpus)
    try:
        if technique == "single" and gpus != 1:
            raise Infeasible("'single' runs on one device")
        if technique not in (*TECHNIQUES_ONE_DEVICE, *TECHNIQUES_MANY_DEVICES):
            raise Infeasible(f"technique {technique!r} is not measured by the profiler")
        summary, peak = measure_group(spec, backend, technique, gpus, settings=settings,
                                      seed=seed, threads=threads, timeout_s=timeout_s)
    except Infeasible as exc:
        return cell.model_copy(update={"status": "infeasible", "reason": str(exc)})
    except WorkerError as exc:
        # FSDP where torch does not support it on this device raises inside the worker
        status = "infeasible" if technique == "fsdp" and exc.raised else "error"
        return cell.model_copy(update={"status": status, "reason": str(exc)})
    return cell.model_copy(update={"step_s": summary.step_s, "peak_memory_bytes": peak})


#: Seconds a busy neighbour may take to build its job and run its first step.
NEIGHBOUR_READY_S = 60.0


def _start_neighbours(spec: JobSpec, world: int, seed: int, threads: int
                      ) -> tuple[list[Any], Any]:
    """Start one :func:`busy_neighbour` on each CPU device after the cell's first
    ``world`` and wait until each has stepped once; returns the processes and the stop
    event."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    sets = cpu_core_sets(cores // threads, threads) if cores // threads > world else None
    ctx = context()
    stop = ctx.Event()
    processes: list[Any] = []
    for core_set in (sets or [])[world:]:
        ready = ctx.Event()
        process = ctx.Process(target=busy_neighbour,
                              args=(spec.name, seed, threads, core_set, ready, stop),
                              daemon=True)
        process.start()
        processes.append((process, ready))
    for _process, ready in processes:
        if not ready.wait(NEIGHBOUR_READY_S):
            log.warning("a busy neighbour did not start in %g s", NEIGHBOUR_READY_S)
    return [process for process, _ in processes], stop


def _stop_neighbours(processes: list[Any], stop: Any) -> None:
    stop.set()
    for process in processes:
        process.join(timeout=5.0)
        if process.is_alive():
            process.kill()
            process.join(timeout=5.0)


def busy_neighbour(job: str, seed: int, threads: int, cores: list[int], ready: Any,
                   stop: Any) -> None:
    """Worker body: train ``job`` untimed on ``cores`` until ``stop`` is set (sets
    ``ready`` after the first step)."""
    from schedlab.profiler.workers import setup_worker
    from schedlab.profiler.zoo import TrainingJob, parse_job_name

    setup_worker(threads, cores)
    training = TrainingJob(parse_job_name(job), seed=seed)
    training.step()
    ready.set()
    while not stop.is_set():
        training.step()


# ------------------------------------------------------------------------------ in workers


def group_worker(payload: dict[str, Any]) -> dict[str, Any]:
    """Worker body: build the job under the technique, time it, return durations and peak
    memory (runs in a worker process; see the module docstring)."""
    import torch

    from schedlab.profiler.timing import PeakMemory, device_sync, time_steps
    from schedlab.profiler.workers import setup_worker
    from schedlab.profiler.zoo import parse_job_name

    setup_worker(payload["threads"], payload["cores"])
    # FSDP2 warns on every wrapped module that returns a view; the zoo never edits in place
    warnings.filterwarnings("ignore", message="FSDP2-wrapped module", category=UserWarning)
    rank, world, technique = payload["rank"], payload["world"], payload["technique"]
    settings = Settings.model_validate(payload["settings"])
    spec = parse_job_name(payload["job"])
    device = f"cuda:{rank}" if payload["backend"] == "cuda" else "cpu"
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    memory = PeakMemory(device)
    memory.start()
    distributed = technique != "single"
    if distributed:
        # never destroyed: the worker leaves with os._exit once it has answered (workers.py)
        _init_group(payload, device)
    job = _build(spec, technique, payload["seed"], rank, world, device)
    agree = _rank0_decides(device) if distributed else None
    timing = time_steps(job.step, settings, sync=device_sync(device), agree=agree)
    peak = memory.bytes()
    return {"durations_s": list(timing.durations_s), "stopped_by": timing.stopped_by,
            "peak_memory_bytes": peak}


def _init_group(payload: dict[str, Any], device: str) -> None:
    import torch.distributed as dist

    backend = "nccl" if device.startswith("cuda") else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{payload['port']}",
                            rank=payload["rank"], world_size=payload["world"])


def _build(spec: JobSpec, technique: str, seed: int, rank: int, world: int,
           device: str) -> Any:
    """The :class:`TrainingJob` of rank ``rank`` under ``technique``.  All ranks build the
    same initial weights (seed ``seed``); each draws its own batches (seed ``seed + rank``)."""
    import torch

    from schedlab.profiler.zoo import TrainingJob, build_model, stages

    if technique == "single":
        return TrainingJob(spec, seed=seed, device=device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_model(spec).to(device)
    if technique == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        wrapped: torch.nn.Module = DistributedDataParallel(model)
        return TrainingJob(spec, seed=seed + rank, device=device, model=wrapped)
    if technique == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cuda" if device.startswith("cuda") else "cpu", (world,))
        for _, stage in stages(model):
            # a container without forward (ModuleList) is sharded element by element
            units = list(stage) if isinstance(stage, torch.nn.ModuleList) else [stage]
            for unit in units:
                if any(True for _ in unit.parameters()):
                    fully_shard(unit, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return TrainingJob(spec, seed=seed + rank, device=device, model=model)
    raise ValueError(f"unknown technique {technique!r}")


def _rank0_decides(device: str) -> Any:
    """``agree`` for :func:`time_steps`: broadcast rank 0's stop decision to every rank."""
    import torch
    import torch.distributed as dist

    def agree(decision: StopReason | None) -> StopReason | None:
        code = torch.tensor([_STOP_CODES.index(decision)], device=device)
        dist.broadcast(code, src=0)
        return _STOP_CODES[int(code.item())]

    return agree
