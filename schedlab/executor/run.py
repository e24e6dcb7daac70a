"""``run_replay``: load a solution and its instance, plan, predict, replay, report."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from schedlab.errors import InputError
from schedlab.executor.backends import Backend, make_backend
from schedlab.executor.plan import Plan, build_plan
from schedlab.executor.predict import predict
from schedlab.executor.replay import DEFAULT_CHECKPOINT_EVERY_S, Hooks, Replay, ReplaySettings
from schedlab.executor.report import ReplayReport, build_report
from schedlab.instance import load_instance
from schedlab.solution import load_solution

log = logging.getLogger(__name__)


def load_plan(solution_file: str | Path, instance_file: str | Path, *,
              work_scale: float = 1.0) -> Plan:
    """The replay plan of the solution file on the instance file (InputError naming the file
    and field of anything that cannot be replayed)."""
    instance = load_instance(instance_file)
    solution = load_solution(solution_file)
    if solution.instance.hash and solution.instance.hash != instance.content_hash():
        log.warning("%s was solved for instance %r with another content hash than %s",
                    solution_file, solution.instance.name, instance_file)
    return build_plan(solution, instance, solution_file=str(solution_file),
                      instance_file=str(instance_file), work_scale=work_scale)


def run_replay(solution_file: str | Path, instance_file: str | Path, *,
               backend: str | Backend = "local", time_scale: float = 1.0, threads: int = 1,
               workdir: str | Path = "replay", resume: bool = False,
               segment_steps: bool = False, scale_work: bool = False,
               checkpoint_every_s: float = DEFAULT_CHECKPOINT_EVERY_S,
               devices: dict[tuple[str, int], str] | None = None,
               ray_address: str | None = None, out: str | Path | None = None,
               hooks: Hooks | None = None) -> ReplayReport:
    """Replay ``solution_file`` on real zoo jobs and report predicted vs realized JCT
    (docs/executor.md).  Writes ``<workdir>/journal.jsonl``, checkpoints under
    ``<workdir>/checkpoints`` and, when ``out`` is given, the report (atomically).
    ``backend`` is ``"local"``, ``"ray"`` or a started :class:`Backend`, which is left
    running (so several replays can share warm workers).  ``scale_work``: the work shrinks
    with the time (a job runs ceil(R / X) real steps), so an instance with hours of work
    replays in minutes and its predicted JCTs are the instance's own (docs/executor.md)."""
    if not time_scale > 0:
        raise InputError(f"must be > 0, got {time_scale}", field="--time-scale")
    if threads < 1:
        raise InputError(f"must be >= 1, got {threads}", field="--threads")
    if checkpoint_every_s < 0:
        raise InputError(f"must be >= 0, got {checkpoint_every_s}", field="--checkpoint-every")
    plan = load_plan(solution_file, instance_file,
                     work_scale=time_scale if scale_work else 1.0)
    devices = dict(devices or {})
    for slot, device in devices.items():
        if slot not in plan.slots:
            raise InputError(f"{slot[0]}:{slot[1]} is not a GPU of the instance",
                             field="--device-map")
        _check_cuda(device)
    prediction = predict(plan, time_scale)
    settings = ReplaySettings(time_scale=time_scale, segment_steps=segment_steps,
                              checkpoint_every_s=checkpoint_every_s, workdir=Path(workdir),
                              devices=devices, resume=resume)
    runner = make_backend(backend, threads=threads, address=ray_address, devices=devices)
    backend_name = runner.name
    replay = Replay(plan, prediction, runner, settings, hooks)
    started = time.perf_counter()
    records = replay.run()
    report = build_report(plan, prediction, records, solution=str(solution_file),
                          instance=str(instance_file), backend=backend_name,
                          segment_steps=segment_steps, time_scale=time_scale, threads=threads,
                          checkpoint_every_s=checkpoint_every_s,
                          wall_s=time.perf_counter() - started)
    if out is not None:
        report.save(out)
    return report


def _check_cuda(device: str) -> None:
    import torch

    if not torch.cuda.is_available():
        raise InputError(f"{device} requested but CUDA is not available", field="--device-map")
    index = int(device.partition(":")[2] or 0)
    if index >= torch.cuda.device_count():
        raise InputError(f"{device}: only {torch.cuda.device_count()} CUDA device(s)",
                         field="--device-map")
