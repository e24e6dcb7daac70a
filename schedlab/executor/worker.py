"""What runs on one device slot: segments of zoo jobs, with restore, checkpoints and gangs.

A :class:`SlotWorker` lives in one persistent process per slot (a ``spawn`` child of the
local backend, or a Ray actor) with ``torch.set_num_threads(threads)``.  The replay sends it
*orders* (plain dicts, :func:`make_order`); for each it:

1. waits until the segment's start (``start_wall``, a ``time.time()`` value);
2. makes the job's state current: the job's model is *resident* when this worker ran it last
   and its step counter equals the order's ``expected_steps`` (kept for the last
   :data:`RESIDENT_LIMIT` jobs, with each job's own torch RNG state); otherwise it restores
   the newest good checkpoint (:func:`schedlab.profiler.checkpoint.load_latest`; corrupt or
   refused files, and files whose contents are not the step count in their name or lie past
   the job's work, are skipped and reported) or starts the job from scratch when there is none;
3. for a gang (``world`` > 1) joins a fresh process group (gloo on CPU, NCCL on CUDA) whose
   store the replay hosts at ``<master>:<port>`` for the segment, and wraps the model in
   ``DistributedDataParallel``; rank ``r``
   draws its batches with seed ``seed + r`` (``batch_size`` samples per rank, as the
   profiler's DDP cells), rank 0 writes the checkpoints, and the ranks stop together: they
   agree (an all-reduce MIN) on how many steps still fit, take half of them (all when
   :data:`FINAL_STRETCH` or fewer) and agree again (:func:`steps_that_fit`,
   :func:`stretch`).  An agreement after every step, as before, cost a gloo pair of small
   models on two CPU cores about a third of its steps per second;
4. trains until the job reaches ``until_steps`` or, in wall-time mode, until the next step
   would end nearer after ``end_wall`` than before it; every ``checkpoint_every_s`` wall
   seconds it checkpoints (durable, checksummed), and at the end when ``checkpoint_at_end``
   (the job is preempted or moves) or when the job finished;
5. answers a result dict: steps before/after, restore source, corrupt files skipped, first
   step start, last step end, switch seconds (segment start -> first step start) and the
   checkpoints it wrote.

``progress`` (optional callback) receives ``(steps_done, wall, checkpoint_steps,
checkpoint_wall)`` after a step at most every :data:`PROGRESS_EVERY_S` seconds and after every
checkpoint, so the replay knows (to within that interval) how much work a killed worker lost.
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from schedlab.profiler.checkpoint import load_latest, save_checkpoint
from schedlab.profiler.zoo import TrainingJob, parse_job_name

log = logging.getLogger(__name__)

#: Jobs a worker keeps resident (model + optimizer in memory) after they leave it.
RESIDENT_LIMIT = 4
#: Seconds a gang's process group waits for its members before it fails.
GANG_TIMEOUT_S = 60.0
#: Least wall seconds between two progress reports (a report after every step would cost
#: a few percent of a millisecond step); a checkpoint is always reported at once.
PROGRESS_EVERY_S = 0.02

#: A gang takes the steps that still fit without deciding again once they are this few.
FINAL_STRETCH = 4
#: Most steps a gang takes between two decisions.
MAX_STRETCH = 64

Progress = Callable[[int, float, int | None, float | None], None]


def make_order(*, segment: int, job: str, spec: str, seed: int, expected_steps: int,
               until_steps: int, work_steps: int, checkpoint_dir: str, start_wall: float,
               end_wall: float | None, checkpoint_every_s: float, checkpoint_at_end: bool,
               device: str = "cpu", rank: int = 0, world: int = 1,
               master: str = "127.0.0.1", port: int = 0) -> dict[str, Any]:
    """One segment order (a plain dict, so it crosses pipes and Ray unchanged)."""
    return {"segment": segment, "job": job, "spec": spec, "seed": seed,
            "expected_steps": expected_steps, "until_steps": until_steps,
            "work_steps": work_steps,
            "checkpoint_dir": checkpoint_dir, "start_wall": start_wall, "end_wall": end_wall,
            "checkpoint_every_s": checkpoint_every_s, "checkpoint_at_end": checkpoint_at_end,
            "device": device, "rank": rank, "world": world, "master": master, "port": port}


class _Resident:
    """A job held in memory with its own global-RNG state."""

    def __init__(self, job: TrainingJob) -> None:
        self.job = job
        self.rng = torch.get_rng_state()


class SlotWorker:
    """Runs orders on one slot; keeps recently run jobs resident."""

    def __init__(self, threads: int = 1, cores: list[int] | None = None) -> None:
        if cores and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(cores))
        torch.set_num_threads(threads)
        self.threads = threads
        self.resident: OrderedDict[str, _Resident] = OrderedDict()

    def warm_up(self, specs: list[str]) -> float:
        """Build each job of ``specs`` and run one step of it, then drop it: torch's lazy
        first-use costs (about 1-2 s in a fresh process) are paid before the replay clock
        starts, as a long-lived cluster worker would have paid them.  The global RNG is left
        as it was.  Returns the seconds it took."""
        started = time.perf_counter()
        with torch.random.fork_rng(devices=[]):
            for name in specs:
                TrainingJob(parse_job_name(name), seed=0).step()
        return time.perf_counter() - started

    def pid(self) -> int:
        """This worker's process id (the fault tests kill it)."""
        return os.getpid()

    def _current(self, order: dict[str, Any]) -> tuple[TrainingJob, dict[str, Any]]:
        """The job at its current state, and how it got there."""
        held = self.resident.pop(order["checkpoint_dir"], None)
        if held is not None and held.job.steps_done == order["expected_steps"] \
                and str(held.job.device) == str(torch.device(order["device"])):
            torch.set_rng_state(held.rng)
            return held.job, {"resident": True, "restored_steps": None, "corrupt": []}
        spec = parse_job_name(order["spec"])
        job = TrainingJob(spec, seed=order["seed"], device=order["device"])
        restored = load_latest(order["checkpoint_dir"], max_steps=order["work_steps"])
        info: dict[str, Any] = {"resident": False, "restored_steps": None,
                                "corrupt": [str(p) for p in restored.corrupt]}
        if restored.state is not None:
            job.load_state(restored.state)
            info["restored_steps"] = job.steps_done
        else:
            torch.manual_seed(order["seed"])
        return job, info

    def _keep(self, key: str, job: TrainingJob) -> None:
        """Keep ``job`` resident under ``key`` (its checkpoint folder: unique per job and
        replay, so a worker serving several replays never mixes them up)."""
        self.resident[key] = _Resident(job)
        self.resident.move_to_end(key)
        while len(self.resident) > RESIDENT_LIMIT:
            self.resident.popitem(last=False)

    def run(self, order: dict[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        """Run one segment order; returns its result dict (see the module docstring)."""
        delay = order["start_wall"] - time.time()
        if delay > 0:
            time.sleep(delay)
        job, info = self._current(order)
        steps_before = job.steps_done
        rank, world = order["rank"], order["world"]
        stepper = job
        group = False
        if world > 1:
            stepper = self._join_gang(order, job)
            group = True
        checkpoints: list[tuple[int, float]] = []
        first_step: float | None = None
        last_end: float | None = None
        last_checkpoint = time.time()
        last_report = 0.0
        mean_step = 0.0
        until, end_wall = order["until_steps"], order["end_wall"]
        every = order["checkpoint_every_s"]
        left = 0  # steps this rank takes before the next decision (the group's, for a gang)
        try:
            while True:
                now = time.time()
                if left == 0:
                    fit = steps_that_fit(until - stepper.steps_done, end_wall, now, mean_step)
                    if group:
                        fit = _min_over_ranks(fit, job.device)
                    if fit <= 0:
                        break
                    left = stretch(fit) if group else 1
                if first_step is None:
                    first_step = now
                stepper.step()
                left -= 1
                last_end = time.time()
                duration = last_end - now
                mean_step = duration if mean_step == 0.0 else 0.8 * mean_step + 0.2 * duration
                saved_now = False
                if every > 0 and last_end - last_checkpoint >= every:
                    self._checkpoint(order, stepper, job, checkpoints)
                    last_checkpoint = time.time()
                    saved_now = True
                if progress is not None and rank == 0 and (
                        saved_now or last_end - last_report >= PROGRESS_EVERY_S):
                    saved = checkpoints[-1] if checkpoints else (None, None)
                    progress(stepper.steps_done, last_end, saved[0], saved[1])
                    last_report = last_end
            job.steps_done = stepper.steps_done
            finished = job.steps_done >= order["work_steps"]
            if order["checkpoint_at_end"] or finished:
                if not checkpoints or checkpoints[-1][0] != job.steps_done:
                    self._checkpoint(order, stepper, job, checkpoints)
        finally:
            if group:
                stepper = job  # drop the DDP wrapper (and its reducer) before the group
                _leave_gang()
        self._keep(order["checkpoint_dir"], job)
        start = order["start_wall"]
        return {"segment": order["segment"], "job": order["job"], "rank": rank,
                "pid": os.getpid(), "steps_before": steps_before,
                "steps_after": job.steps_done, **info,
                "first_step_wall": first_step, "last_step_wall": last_end,
                "end_wall": time.time(),
                "switch_s": (first_step - start) if first_step is not None else None,
                "checkpoints": checkpoints}

    def _checkpoint(self, order: dict[str, Any], stepper: TrainingJob, job: TrainingJob,
                    checkpoints: list[tuple[int, float]]) -> None:
        job.steps_done = stepper.steps_done
        if order["rank"] == 0:
            state = job.state()
            state["seed"] = order["seed"]
            save_checkpoint(Path(order["checkpoint_dir"]), state)
        checkpoints.append((job.steps_done, time.time()))

    def _join_gang(self, order: dict[str, Any], job: TrainingJob) -> TrainingJob:
        """Join the segment's process group and return a job stepping the DDP-wrapped model
        (sharing ``job``'s parameters and optimizer)."""
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        backend = "nccl" if str(order["device"]).startswith("cuda") else "gloo"
        timeout = datetime.timedelta(seconds=GANG_TIMEOUT_S)
        # the replay hosts the group's store (so no rank tears it down under another)
        store = dist.TCPStore(order["master"], order["port"], order["world"], is_master=False,
                              timeout=timeout)
        dist.init_process_group(backend, store=store, rank=order["rank"],
                                world_size=order["world"], timeout=timeout)
        device = torch.device(order["device"])
        ids = [device.index] if device.type == "cuda" else None
        wrapped = DistributedDataParallel(job.model, device_ids=ids)
        stepper = TrainingJob(job.spec, seed=order["seed"] + order["rank"], device=device,
                              model=wrapped)
        stepper.optimizer = job.optimizer
        stepper.steps_done = job.steps_done
        return stepper


def steps_that_fit(remaining: int, end_wall: float | None, now: float, mean_step: float) -> int:
    """Whole steps to take from ``now``: at most the ``remaining`` steps of the target and, in
    wall-time mode, the ``n`` whose end ``now + n m`` lies nearer before ``end_wall`` than
    the next one's after it, ``n = floor((end_wall - now) / m + 1/2)`` for a mean step of
    ``m`` seconds.  Before the first step (``m`` unknown) one step, if ``now`` is before
    the end."""
    if remaining <= 0:
        return 0
    if end_wall is None:
        return remaining
    if mean_step <= 0.0:
        return 1 if now < end_wall else 0
    return max(0, min(remaining, math.floor((end_wall - now) / mean_step + 0.5)))


def stretch(fit: int) -> int:
    """Steps a gang takes before it decides again, when ``fit`` steps fit: all of them when
    at most :data:`FINAL_STRETCH`, else half (at most :data:`MAX_STRETCH`), so the decisions
    get denser towards the end and the estimate of the last steps is fresh.  Every rank
    computes the same from the same agreed ``fit``."""
    return fit if fit <= FINAL_STRETCH else min(fit // 2, MAX_STRETCH)


def _min_over_ranks(value: int, device: torch.device) -> int:
    """The smallest ``value`` of the group's ranks, on every rank (an all-reduce MIN)."""
    import torch.distributed as dist

    tensor = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MIN)
    return int(tensor.item())


def _leave_gang() -> None:
    """Leave the segment's process group: the DDP wrapper is gone (collected first, so no
    reducer outlives its group), then the group is destroyed.  No closing barrier: the store
    is the replay's, so no rank can tear it down under another, and every collective of the
    segment has completed on all ranks (the last agreement, an all-reduce)."""
    import gc

    import torch.distributed as dist

    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()
