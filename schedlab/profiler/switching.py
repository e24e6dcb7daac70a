r"""Switch costs measured on real PyTorch: seconds to make a device ready to run a job's next
step, and to run that step.

A *switch* to job J on a device ends when J's first optimizer step after the switch has
finished (on CUDA, after ``torch.cuda.synchronize``): the first step is **part of every
kind** and nothing is subtracted from any measurement.  J resumes from its checkpoint (model,
optimizer, step counter, RNG), written before the measurement with
:func:`schedlab.profiler.checkpoint.save_checkpoint` after one step of J (so the optimizer
state -- SGD momentum or Adam moments -- exists and is loaded too).  Four kinds:

``cold``
    A new worker process: the parent calls ``Process.start()`` of a ``spawn`` context; the
    child starts Python, imports torch, sets its thread count, builds J's model and
    optimizer, reads and verifies the checkpoint (:func:`~schedlab.profiler.checkpoint.
    load_latest`: sha256 + ``torch.load(weights_only=True)``), loads it and runs the first
    step, then sends one message through a pipe.  The time runs from just before
    ``start()`` to the moment the parent receives that message (``time.perf_counter`` in
    the parent; the message is a few bytes, its latency is microseconds).  It includes
    everything a restarted worker pays, also the spawn machinery's import of the parent's
    ``__main__`` module.
``warm``
    A live worker (torch imported, running another job P): build J's model and optimizer,
    read and verify the checkpoint, ``load_state_dict``, first step.  Timed in the worker,
    from the command's receipt to the end of the first step.
``pipelined``
    A live worker as for ``warm``; J's checkpoint is split into one file per *load unit*
    (:func:`load_units`: the model's top-level children from :func:`~schedlab.profiler.zoo.
    stages`, a ``ModuleList`` expanded into its members, and a first unit with the
    parameters held by the model itself plus the step counter and RNG state) and a last
    file with the optimizer state.  A loader thread starts reading and verifying the files
    while the main thread builds the model (the two overlap), then loads the units in
    forward order into the model while the main thread runs the first step: a forward
    pre-hook on each unit waits until that unit's weights are in place, and an optimizer step
    pre-hook waits for the optimizer state, so the computation chases the loading (Titan's
    pipelined switch, PipeSwitch's layer-group pipeline).  On CUDA the loader copies each
    unit on a separate copy stream and the compute stream waits on an event per unit.  On
    CPU the overlap only helps as far as the loader and the compute can run at the same
    time (the loader's decoding holds the GIL; torch's kernels release it), and for models
    whose step is short next to their load it gives little: the measurements say how much,
    and docs/switch-costs.md reports them as measured.
``resident``
    Hare's switch: J's model is already resident in the live worker (speculative retention
    of a recently used model, its parameters current) and the previous task's activations
    were freed early (the previous task, a step of P, finished and its gradients were
    released before the switch).  Only the optimizer state, the step counter and the RNG
    state are swapped in (from a checksummed file holding just those, written with the
    checkpoint), then the first step.

Every live-worker kind first runs one *warm-up* switch of the same kind that is not timed
(``warmup``; likewise one extra cold spawn, which warms the OS page cache with torch's
libraries), then ``repeats`` timed switches, each after one step of P; the worker keeps one
``cpu_threads``-thread torch.  The result is the mean over the repeats with a Student-t
confidence interval (:data:`CONFIDENCE`), as a :class:`~schedlab.profiler.matrix.
SwitchMeasurement` that also records the size of J's checkpoint file.

P, the job the live worker was running, is the next zoo model after J's at the same size and
batch size (:func:`previous_job`).

torch is imported lazily: importing this module does not import it.
"""

from __future__ import annotations

import gc
import logging
import math
import statistics
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedlab.errors import InputError
from schedlab.profiler.matrix import SWITCH_KINDS, SwitchMeasurement

if TYPE_CHECKING:
    from torch import nn

    from schedlab.profiler.zoo import JobSpec, TrainingJob

log = logging.getLogger(__name__)

#: Confidence level of the interval around the mean switch time.
CONFIDENCE = 0.95
#: Seconds the parent waits for a worker's answer before it gives up on the measurement.
WORKER_TIMEOUT_S = 600.0
#: Seed of the measured job's weights, data and RNG (any fixed value).
JOB_SEED = 0
#: The kinds a live worker measures (``cold`` needs a new process per repeat).
LIVE_KINDS: tuple[str, ...] = ("warm", "pipelined", "resident")

_ROOT_UNIT = "(root)"


@dataclass(frozen=True)
class SwitchFiles:
    """What a switch to one job reads: the full checkpoint folder (``cold``, ``warm``), the
    per-unit files and the optimizer file of the pipelined load, and the optimizer-only file
    of the resident switch."""

    checkpoint_folder: Path
    checkpoint_bytes: int
    unit_files: tuple[Path, ...]
    optimizer_file: Path
    resident_file: Path


# ------------------------------------------------------------------------ helpers


def previous_job(spec: JobSpec) -> JobSpec:
    """P: the job a live worker was running before the switch to ``spec`` (the next zoo model
    after ``spec.model``, same size and batch size)."""
    from schedlab.profiler.zoo import MODELS, JobSpec

    index = MODELS.index(spec.model)
    return JobSpec(MODELS[(index + 1) % len(MODELS)], spec.size, spec.batch_size)


def load_units(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The units a pipelined switch loads one by one, in forward order: the model's stages
    (:func:`~schedlab.profiler.zoo.stages`), with a ``ModuleList`` / ``ModuleDict`` (never
    called itself, so a hook on it would never fire) replaced by its members."""
    from torch import nn

    from schedlab.profiler.zoo import stages

    units: list[tuple[str, nn.Module]] = []
    for name, module in stages(model):
        if isinstance(module, nn.ModuleList | nn.ModuleDict):
            units.extend((f"{name}.{child}", sub) for child, sub in module.named_children())
        else:
            units.append((name, module))
    return units


def split_state(model_state: dict[str, Any], unit_names: Sequence[str]) -> list[dict[str, Any]]:
    """``model_state`` (a state dict) split into the root entries (keys under no unit) and
    one state dict per unit (its keys without the unit's prefix), in ``unit_names`` order."""
    parts: list[dict[str, Any]] = [{} for _ in range(len(unit_names) + 1)]
    for key, value in model_state.items():
        for index, name in enumerate(unit_names):
            if key.startswith(name + "."):
                parts[index + 1][key[len(name) + 1:]] = value
                break
        else:
            parts[0][key] = value
    return parts


def mean_ci(samples: Sequence[float], confidence: float = CONFIDENCE
            ) -> tuple[float, tuple[float, float] | None]:
    """Mean of ``samples`` and its Student-t interval (None with fewer than 2 samples)."""
    mean = statistics.fmean(samples)
    if len(samples) < 2:
        return mean, None
    from scipy.stats import t

    half = (float(t.ppf(0.5 + confidence / 2, len(samples) - 1))
            * statistics.stdev(samples) / math.sqrt(len(samples)))
    return mean, (mean - half, mean + half)


def prepare_switch_files(spec: JobSpec, workdir: Path) -> SwitchFiles:
    """Train ``spec`` one step on CPU (seed :data:`JOB_SEED`) and write what the switches
    read: its checkpoint (:func:`~schedlab.profiler.checkpoint.save_checkpoint`), the
    per-unit files and optimizer file of the pipelined load, the resident switch's
    optimizer-only file; all checksummed (:func:`~schedlab.profiler.checkpoint.encode`)."""
    import torch

    from schedlab.profiler.checkpoint import encode, save_checkpoint, write_durable
    from schedlab.profiler.zoo import TrainingJob

    folder = Path(workdir) / spec.name.replace("/", "_").replace("@", "_b")
    with torch.random.fork_rng(devices=[]):
        job = TrainingJob(spec, seed=JOB_SEED)
        job.step()
        state = job.state()
        path = save_checkpoint(folder / "checkpoint", state, keep=1)
        names = [name for name, _ in load_units(job.model)]
    parts = split_state(state["model"], names)
    meta = {"steps_done": state["steps_done"], "seed": state["seed"], "rng": state["rng"]}
    unit_files = []
    for index, part in enumerate(parts):
        unit_path = folder / "pipelined" / f"unit-{index:03d}.ckpt"
        payload = {"model": part, **meta} if index == 0 else {"model": part}
        write_durable(unit_path, encode(payload))
        unit_files.append(unit_path)
    optimizer_file = folder / "pipelined" / "optimizer.ckpt"
    write_durable(optimizer_file, encode({"optimizer": state["optimizer"]}))
    resident_file = folder / "resident.ckpt"
    write_durable(resident_file, encode({"optimizer": state["optimizer"], **meta}))
    return SwitchFiles(folder / "checkpoint", path.stat().st_size, tuple(unit_files),
                       optimizer_file, resident_file)


def _torch_device(backend: str) -> str:
    return "cuda" if backend == "cuda" else "cpu"


def _synchronize(backend: str) -> None:
    if backend == "cuda":
        import torch

        torch.cuda.synchronize()


# ------------------------------------------------------------------ the switches


def _new_job(spec: JobSpec, backend: str) -> TrainingJob:
    from schedlab.profiler.zoo import TrainingJob

    return TrainingJob(spec, seed=JOB_SEED, device=_torch_device(backend))


def switch_warm(spec: JobSpec, files: SwitchFiles, backend: str) -> TrainingJob:
    """Build, load the verified checkpoint, first step (the ``warm`` and ``cold`` work)."""
    from schedlab.profiler.checkpoint import load_latest

    job = _new_job(spec, backend)
    restored = load_latest(files.checkpoint_folder)
    if restored.state is None:
        raise RuntimeError(f"no good checkpoint in {files.checkpoint_folder}")
    job.load_state(restored.state)
    job.step()
    _synchronize(backend)
    return job


def switch_resident(job: TrainingJob, files: SwitchFiles, backend: str) -> TrainingJob:
    """Swap the optimizer state, step counter and RNG into the resident ``job``; first step."""
    import torch

    from schedlab.profiler.checkpoint import decode

    state = decode(files.resident_file.read_bytes(), source=str(files.resident_file))
    job.optimizer.load_state_dict(state["optimizer"])
    job.steps_done = int(state["steps_done"])
    job.seed = int(state["seed"])
    torch.set_rng_state(state["rng"])
    job.step()
    _synchronize(backend)
    return job


class _PipelinedLoader:
    """The loader thread of a pipelined switch and the hooks that make the step wait for it.

    The thread starts before the model is built: it reads, verifies and decodes unit i's
    file, waits until the model exists (:meth:`attach`), copies the tensors into the unit's
    parameters and buffers (on CUDA on ``copy_stream``, recording ``cuda_events[i]``) and sets
    ``ready[i]``; the optimizer file is decoded last.  The forward pre-hook of unit i waits
    for ``ready[i]`` (and makes the compute stream wait for the copy); the optimizer's step
    pre-hook waits for the optimizer state and loads it, in the main thread."""

    def __init__(self, files: SwitchFiles, backend: str) -> None:
        import torch

        self.files = files
        self.cuda = backend == "cuda"
        self.job: TrainingJob | None = None
        self.units: list[tuple[str, nn.Module]] = []
        self.attached = threading.Event()
        self.ready = [threading.Event() for _ in files.unit_files]
        self.optimizer_ready = threading.Event()
        self.optimizer_state: dict[str, Any] | None = None
        self.meta: dict[str, Any] = {}
        self.error: BaseException | None = None
        self.copy_stream = torch.cuda.Stream() if self.cuda else None
        self.cuda_events: list[Any] = [None] * len(files.unit_files)
        self._keep_alive: list[Any] = []
        self._thread = threading.Thread(target=self._run, name="pipelined-loader", daemon=True)
        self._handles: list[Any] = []

    def _copy_into(self, index: int, module: nn.Module, part: dict[str, Any]) -> None:
        import torch

        targets = module.state_dict(keep_vars=True)
        with torch.no_grad():
            if self.cuda:
                assert self.copy_stream is not None
                with torch.cuda.stream(self.copy_stream):
                    for key, tensor in part.items():
                        targets[key].copy_(tensor, non_blocking=True)
                    event = torch.cuda.Event()
                    event.record(self.copy_stream)
                self.cuda_events[index] = event
                self._keep_alive.append(part)
            else:
                for key, tensor in part.items():
                    targets[key].copy_(tensor)

    def _run(self) -> None:
        from schedlab.profiler.checkpoint import decode

        try:
            for index, path in enumerate(self.files.unit_files):
                payload = decode(path.read_bytes(), source=str(path))
                if index == 0:
                    self.meta = {k: payload[k] for k in ("steps_done", "seed", "rng")}
                self.attached.wait()
                if self.job is None:  # the main thread gave up before the model existed
                    return
                module = self.job.model if index == 0 else self.units[index - 1][1]
                self._copy_into(index, module, payload["model"])
                self.ready[index].set()
            path = self.files.optimizer_file
            self.optimizer_state = decode(path.read_bytes(), source=str(path))["optimizer"]
        except Exception as exc:  # handed to the main thread, which re-raises it
            self.error = exc
            for event in self.ready:
                event.set()
        self.optimizer_ready.set()

    def wait(self, index: int) -> None:
        import torch

        self.ready[index].wait()
        if self.error is not None:
            raise RuntimeError(f"pipelined load failed: {self.error}") from self.error
        if self.cuda and self.cuda_events[index] is not None:
            torch.cuda.current_stream().wait_event(self.cuda_events[index])

    def _before_optimizer_step(self, *_: Any) -> None:
        self.optimizer_ready.wait()
        if self.error is not None or self.optimizer_state is None or self.job is None:
            raise RuntimeError(f"pipelined load failed: {self.error}") from self.error
        state, self.optimizer_state = self.optimizer_state, None
        self.job.optimizer.load_state_dict(state)

    def start(self) -> None:
        """Start reading and decoding (before the model exists)."""
        self._thread.start()

    def attach(self, job: TrainingJob) -> None:
        """The model exists: install the hooks and let the thread copy into it."""
        units = load_units(job.model)
        if len(self.files.unit_files) != len(units) + 1:
            raise RuntimeError("pipelined files do not match the model's load units")
        self.job, self.units = job, units
        for index, (_, module) in enumerate(units, start=1):
            self._handles.append(module.register_forward_pre_hook(
                lambda *_, i=index: self.wait(i)))
        self._handles.append(job.optimizer.register_step_pre_hook(self._before_optimizer_step))
        self.attached.set()

    def finish(self) -> None:
        self.attached.set()  # a thread still waiting for a model that never came returns
        self._thread.join()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._keep_alive.clear()


def switch_pipelined(spec: JobSpec, files: SwitchFiles, backend: str) -> TrainingJob:
    """Start the loader thread, build the model, then run the first step while the loader
    fills the model unit by unit (module docstring); returns the job after its first step."""
    import torch

    loader = _PipelinedLoader(files, backend)
    loader.start()
    try:
        job = _new_job(spec, backend)
        loader.attach(job)
        loader.wait(0)  # the step counter and the RNG state pick the first batch
        job.steps_done = int(loader.meta["steps_done"])
        job.seed = int(loader.meta["seed"])
        torch.set_rng_state(loader.meta["rng"])
        job.step()
        _synchronize(backend)
    finally:
        loader.finish()
    if loader.error is not None:
        raise RuntimeError(f"pipelined load failed: {loader.error}") from loader.error
    return job


# ----------------------------------------------------------------- worker processes


def _set_threads(cpu_threads: int) -> None:
    import torch

    torch.set_num_threads(cpu_threads)


def _cold_child(conn: Connection, spec: JobSpec, files: SwitchFiles, backend: str,
                cpu_threads: int) -> None:
    """Body of a cold-switch process: import torch, build, load, first step, report."""
    try:
        _set_threads(cpu_threads)
        switch_warm(spec, files, backend)
        conn.send(("ok", None))
    except Exception as exc:  # reported to the parent, which records it
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


class _LiveWorker:
    """State of a live worker process: the job P it was running and, for ``resident``, J's
    retained model."""

    def __init__(self, spec: JobSpec, files: SwitchFiles, backend: str) -> None:
        import torch

        from schedlab.profiler.checkpoint import load_latest

        self.spec = spec
        self.files = files
        self.backend = backend
        self.previous = _new_job(previous_job(spec), backend)
        with torch.random.fork_rng(devices=[]):
            self.previous.step()
            self.resident = _new_job(spec, backend)
            restored = load_latest(files.checkpoint_folder)
            if restored.state is None:
                raise RuntimeError(f"no good checkpoint in {files.checkpoint_folder}")
            self.resident.load_state(restored.state)

    def _previous_task(self) -> None:
        """One step of P, then early cleaning: its gradients are released."""
        self.previous.step()
        self.previous.optimizer.zero_grad(set_to_none=True)
        _synchronize(self.backend)

    def switch(self, kind: str) -> float:
        """One timed switch of ``kind``, after a step of P; seconds."""
        import torch

        with torch.random.fork_rng(devices=[]):
            self._previous_task()
            gc.collect()
            start = time.perf_counter()
            if kind == "warm":
                job = switch_warm(self.spec, self.files, self.backend)
            elif kind == "pipelined":
                job = switch_pipelined(self.spec, self.files, self.backend)
            else:
                job = switch_resident(self.resident, self.files, self.backend)
            seconds = time.perf_counter() - start
            if job is not self.resident:
                del job
        return seconds


def _live_child(conn: Connection, spec: JobSpec, files: SwitchFiles, backend: str,
                cpu_threads: int) -> None:
    """Body of a live worker: set up, then answer ``("switch", kind)`` until ``("stop",)``."""
    try:
        _set_threads(cpu_threads)
        worker = _LiveWorker(spec, files, backend)
        conn.send(("ok", None))
        while True:
            message = conn.recv()
            if message[0] == "stop":
                break
            conn.send(("ok", worker.switch(message[1])))
    except Exception as exc:  # reported to the parent, which records it
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _receive(conn: Connection, what: str) -> Any:
    if not conn.poll(WORKER_TIMEOUT_S):
        raise RuntimeError(f"{what}: no answer within {WORKER_TIMEOUT_S:.0f} s")
    try:
        status, value = conn.recv()
    except EOFError:
        raise RuntimeError(f"{what}: the worker process died") from None
    if status != "ok":
        raise RuntimeError(f"{what}: {value}")
    return value


def _spawn(target: Any, spec: JobSpec, files: SwitchFiles, backend: str,
           cpu_threads: int) -> tuple[Any, Connection]:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=target, args=(child, spec, files, backend, cpu_threads),
                              daemon=True)
    process.start()
    child.close()
    return process, parent


def _stop(process: Any, conn: Connection) -> None:
    process.join(timeout=30)
    if process.is_alive():
        process.terminate()
        process.join()
    conn.close()


def cold_seconds(spec: JobSpec, files: SwitchFiles, backend: str, cpu_threads: int) -> float:
    """One cold switch: from just before ``Process.start()`` to the child's report."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_cold_child,
                              args=(child, spec, files, backend, cpu_threads), daemon=True)
    start = time.perf_counter()
    process.start()
    try:
        _receive(parent, f"cold switch to {spec.name}")
        seconds = time.perf_counter() - start
    finally:
        child.close()
        _stop(process, parent)
    return seconds


# ------------------------------------------------------------------------ the API


def _check(spec: JobSpec, backend: str, kinds: Iterable[str], repeats: int,
           cpu_threads: int) -> list[str]:
    wanted = list(kinds)
    for kind in wanted:
        if kind not in SWITCH_KINDS:
            raise InputError(f"unknown switch kind {kind!r}; known: {', '.join(SWITCH_KINDS)}")
    if backend not in ("cpu", "cuda"):
        raise InputError(f"unknown backend {backend!r}; known: cpu, cuda")
    if repeats < 1 or cpu_threads < 1:
        raise InputError("repeats and cpu_threads must be >= 1")
    if backend == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError("backend 'cuda' asked for, but torch sees no CUDA device")
    return wanted


def _cell(spec: JobSpec, device_label: str, backend: str, kind: str,
          samples: list[float] | None, files: SwitchFiles | None,
          error: str | None = None) -> SwitchMeasurement:
    checkpoint_bytes = files.checkpoint_bytes if files is not None else None
    if error is not None or not samples:
        return SwitchMeasurement(job=spec.name, device=device_label, backend=backend,  # type: ignore[arg-type]
                                 switch=kind, status="error",  # type: ignore[arg-type]
                                 reason=error or "no sample", checkpoint_bytes=checkpoint_bytes)
    mean, ci = mean_ci(samples)
    return SwitchMeasurement(job=spec.name, device=device_label, backend=backend,  # type: ignore[arg-type]
                             switch=kind, seconds=mean, seconds_ci=ci,  # type: ignore[arg-type]
                             repeats=len(samples), checkpoint_bytes=checkpoint_bytes)


def measure_switches(spec: JobSpec, device_label: str, backend: str,
                     kinds: Iterable[str] = SWITCH_KINDS, *, repeats: int = 3,
                     cpu_threads: int = 1, workdir: Path, warmup: int = 1
                     ) -> list[SwitchMeasurement]:
    """:func:`measure_switch` for several kinds of one job, sharing one live worker among the
    live kinds; one cell per kind, in the order asked.  A worker that fails gives cells with
    status ``error`` and the reason (bad arguments raise :class:`InputError`)."""
    wanted = _check(spec, backend, kinds, repeats, cpu_threads)
    files = prepare_switch_files(spec, Path(workdir))
    samples: dict[str, list[float]] = {kind: [] for kind in wanted}
    errors: dict[str, str] = {}
    live = [kind for kind in wanted if kind in LIVE_KINDS]
    if live:
        process, conn = _spawn(_live_child, spec, files, backend, cpu_threads)
        kind = "setup"
        try:
            _receive(conn, f"live worker for {spec.name}")
            for kind in live:
                for index in range(warmup + repeats):
                    conn.send(("switch", kind))
                    seconds = _receive(conn, f"{kind} switch to {spec.name}")
                    if index >= warmup:
                        samples[kind].append(float(seconds))
        except (RuntimeError, OSError) as exc:  # the worker failed or died: it is gone
            for other in live:
                if not (samples[other] and len(samples[other]) == repeats):
                    errors[other] = (str(exc) if other == kind or kind == "setup" else
                                     f"not measured: the worker failed during {kind}")
        finally:
            try:
                conn.send(("stop",))
            except OSError:
                pass
            _stop(process, conn)
    if "cold" in wanted:
        try:
            for index in range(warmup + repeats):
                seconds = cold_seconds(spec, files, backend, cpu_threads)
                if index >= warmup:
                    samples["cold"].append(seconds)
        except RuntimeError as exc:
            errors["cold"] = str(exc)
    cells = []
    for kind in wanted:
        if kind in errors:
            log.warning("switch %s to %s on %s failed: %s", kind, spec.name, device_label,
                        errors[kind])
        cells.append(_cell(spec, device_label, backend, kind, samples[kind], files,
                           errors.get(kind)))
    return cells


def measure_switch(spec: JobSpec, device_label: str, backend: str, kind: str, *,
                   repeats: int = 3, cpu_threads: int = 1, workdir: Path,
                   warmup: int = 1) -> SwitchMeasurement:
    """Seconds of a ``kind`` switch to ``spec`` on a device labelled ``device_label``
    (``backend`` "cpu" or "cuda"), first step included, mean over ``repeats`` timed switches
    after ``warmup`` untimed ones, with its CI and the checkpoint's size (module docstring).
    Files go under ``workdir``."""
    return measure_switches(spec, device_label, backend, [kind], repeats=repeats,
                            cpu_threads=cpu_threads, workdir=workdir, warmup=warmup)[0]
