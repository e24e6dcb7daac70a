"""A profiling campaign: the cells to measure, measured one by one into a throughput file.

:func:`plan` turns the options into a list of cells (in this order, per device): the solo /
data-parallel cell of every job at every scale factor, the colocated pairs (every unordered
pair of jobs, a job with itself included), the batch-size regimes (every model/size at every
batch size), Saturn's technique cells (``single`` at one device, ``ddp`` and ``fsdp`` at
every scale factor above one) and the switch costs (every job, every kind asked).

:func:`run_campaign` measures them.  A cell already in the output file with status ``ok`` is
skipped (resume) unless ``redo``; after each measured cell the file is rewritten atomically
(write a temporary file, then rename), so Ctrl-C loses no finished cell and never leaves half
a file.  The file's ``settings`` (the stopping rule) and ``host.cpu_threads`` must match the
options: cells timed under another rule are not mixed into one file.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from schedlab.errors import InputError
from schedlab.profiler import hostload
from schedlab.profiler.matrix import (
    Cell,
    ColocatedMeasurement,
    Measurement,
    RegimeMeasurement,
    Settings,
    SwitchMeasurement,
    TechniqueMeasurement,
    ThroughputFile,
    current_host,
    load_throughputs,
)
from schedlab.profiler.parallel import (
    TECHNIQUES_MANY_DEVICES,
    TECHNIQUES_ONE_DEVICE,
    measure_scale_factor,
    measure_technique,
)
from schedlab.profiler.workers import DEFAULT_TIMEOUT_S
from schedlab.profiler.zoo import JobSpec

log = logging.getLogger(__name__)

Backend = Literal["cpu", "cuda"]


@dataclass(frozen=True)
class Device:
    """A device type to measure: its ``label`` in instances, its ``backend`` and what it is."""

    label: str
    backend: Backend
    description: str = ""


@dataclass(frozen=True)
class CampaignOptions:
    """What ``schedlab profile`` measures (see the module docstring)."""

    jobs: tuple[JobSpec, ...]
    devices: tuple[Device, ...]
    scale_factors: tuple[int, ...] = (1,)
    colocate: bool = False
    regimes: bool = False
    samples_per_epoch: int = 50_000
    techniques: bool = False
    switches: tuple[str, ...] = ()
    switch_repeats: int = 3
    threads: int = 1
    seed: int = 0
    settings: Settings = field(default_factory=Settings)
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class PlannedCell:
    """One cell to measure: ``template`` holds its identity (``template.key``)."""

    template: Cell
    label: str
    measure: Callable[[], Cell]

    @property
    def key(self) -> str:
        return self.template.key


@dataclass
class CampaignResult:
    """What a campaign did: cells measured, skipped (already ok), and whether Ctrl-C
    stopped it; ``file`` is the throughput file as written."""

    file: ThroughputFile
    measured: list[Cell] = field(default_factory=list)
    skipped: int = 0
    interrupted: bool = False


def plan(options: CampaignOptions) -> list[PlannedCell]:
    """The campaign's cells, in measuring order (module docstring)."""
    cells: list[PlannedCell] = []
    jobs = options.jobs
    common = {"settings": options.settings, "seed": options.seed, "threads": options.threads,
              "timeout_s": options.timeout_s}
    for device in options.devices:
        label, backend = device.label, device.backend
        for spec in jobs:
            for s in options.scale_factors:
                cells.append(PlannedCell(
                    Measurement(job=spec.name, device=label, backend=backend, scale_factor=s),
                    f"{spec.name} x{s} on {label}",
                    _bind(measure_scale_factor, spec, label, backend, s, **common)))
        if options.colocate:
            for i, first in enumerate(jobs):
                for second in jobs[i:]:
                    cells.append(_colocated(first, second, device, common))
        if options.regimes:
            for model, size in dict.fromkeys((j.model, j.size) for j in jobs):
                for batch in dict.fromkeys(j.batch_size for j in jobs
                                           if (j.model, j.size) == (model, size)):
                    cells.append(_regime(model, size, batch, device, options, common))
        if options.techniques:
            for spec in jobs:
                for gpus in options.scale_factors:
                    names = TECHNIQUES_ONE_DEVICE if gpus == 1 else TECHNIQUES_MANY_DEVICES
                    for technique in names:
                        cells.append(PlannedCell(
                            TechniqueMeasurement(job=spec.name, device=label, backend=backend,
                                                 technique=technique, gpus=gpus),
                            f"{technique} {spec.name} on {gpus} {label}",
                            _bind(measure_technique, spec, label, backend, technique, gpus,
                                  **common)))
        for spec in jobs:
            for kind in options.switches:
                cells.append(PlannedCell(
                    SwitchMeasurement(job=spec.name, device=label, backend=backend,
                                      switch=kind),  # type: ignore[arg-type]
                    f"{kind} switch to {spec.name} on {label}",
                    _bind(_measure_switch, spec, label, backend, kind,
                          repeats=options.switch_repeats, threads=options.threads)))
    return cells


def _bind(function: Callable[..., Cell], *args: object, **kwargs: object) -> Callable[[], Cell]:
    def measure() -> Cell:
        return function(*args, **kwargs)

    return measure


def _colocated(first: JobSpec, second: JobSpec, device: Device,
               common: dict[str, object]) -> PlannedCell:
    from schedlab.profiler.colocate import measure_colocated

    return PlannedCell(
        ColocatedMeasurement(jobs=(first.name, second.name), device=device.label,
                             backend=device.backend),
        f"{first.name} + {second.name} on {device.label}",
        _bind(measure_colocated, first, second, device.label, device.backend, **common))


def _regime(model: str, size: str, batch: int, device: Device, options: CampaignOptions,
            common: dict[str, object]) -> PlannedCell:
    from schedlab.profiler.regimes import measure_regime

    return PlannedCell(
        RegimeMeasurement(model=f"{model}/{size}", device=device.label, backend=device.backend,
                          batch_size=batch, samples_per_epoch=options.samples_per_epoch),
        f"epoch of {model}/{size}@{batch} on {device.label}",
        _bind(measure_regime, model, size, batch, options.samples_per_epoch, device.label,
              device.backend, **common))


def _measure_switch(spec: JobSpec, label: str, backend: str, kind: str, *, repeats: int,
                    threads: int) -> Cell:
    """A switch-cost cell (schedlab.profiler.switching), files in a temporary folder."""
    try:
        from schedlab.profiler.switching import measure_switch
    except ImportError as exc:  # pragma: no cover - the module ships with schedlab
        raise InputError(f"switch costs cannot be measured: {exc}", field="--switches") from exc
    with tempfile.TemporaryDirectory(prefix="schedlab-switch-") as workdir:
        return measure_switch(spec, label, backend, kind, repeats=repeats, cpu_threads=threads,
                              workdir=Path(workdir))


def measure_planned(cell: PlannedCell) -> Cell:
    """Measure one planned cell (a seam for tests)."""
    return cell.measure()


def open_file(out: Path, options: CampaignOptions) -> ThroughputFile:
    """The existing file at ``out`` (checked against the options) or a new one."""
    devices = {d.label: d.description or d.backend for d in options.devices}
    if not out.exists():
        return ThroughputFile(host=current_host(options.threads, devices),
                              settings=options.settings)
    existing = load_throughputs(out)
    if existing.settings != options.settings:
        raise InputError(
            f"was measured with other timing settings ({_settings_text(existing.settings)}); "
            f"asked for {_settings_text(options.settings)}: use the same options or another "
            "--out", file=str(out), field="settings")
    if existing.host.cpu_threads != options.threads:
        raise InputError(f"was measured with --threads {existing.host.cpu_threads}, asked for "
                         f"{options.threads}: use the same --threads or another --out",
                         file=str(out), field="host.cpu_threads")
    existing.host.devices.update(devices)
    return existing


def _settings_text(settings: Settings) -> str:
    return ", ".join(f"{name}={value}" for name, value in settings.model_dump().items())


def own_cores(planned: PlannedCell, options: CampaignOptions) -> float:
    """Cores a cell keeps busy itself: its processes (the devices it uses on CPU, or one per
    GPU's feeding process) times the threads of each."""
    template = planned.template
    devices = 1
    if isinstance(template, Measurement):
        devices = template.scale_factor
    elif isinstance(template, TechniqueMeasurement):
        devices = template.gpus
    elif isinstance(template, ColocatedMeasurement):
        devices = 1  # two jobs sharing one device
    return float(max(1, devices) * max(1, options.threads))


def _note_host_load(cell: Cell, before: hostload.CpuSample | None, own: float) -> None:
    """Record what else ran during ``cell`` (:mod:`schedlab.profiler.hostload`) and warn in
    one line when the host was busy."""
    load = hostload.since(before, own)
    cell.foreign_cores, cell.load_average, cell.host_busy = (
        load.foreign_cores, load.load_average, load.busy)
    if cell.host_busy is not None:
        log.warning("%s: the host was busy: %s; re-measure it on a quiet host "
                    "(schedlab profile --check FILE compares)", cell.key, cell.host_busy)


def run_campaign(options: CampaignOptions, out: str | Path, *, redo: bool = False,
                 on_cell: Callable[[PlannedCell, Cell | None], None] | None = None,
                 cells: Sequence[PlannedCell] | None = None) -> CampaignResult:
    """Measure the campaign's cells into ``out`` (module docstring).  ``on_cell(planned,
    cell)`` is called after each planned cell (``cell`` None when skipped).  Ctrl-C stops
    the campaign between or inside a cell; the result then says ``interrupted`` and the
    file holds every cell finished before it."""
    path = Path(out)
    data = open_file(path, options)
    todo = list(plan(options) if cells is None else cells)
    result = CampaignResult(file=data)
    try:
        for planned in todo:
            old = data.get(planned.key)
            if old is not None and old.status == "ok" and not redo:
                result.skipped += 1
                if on_cell is not None:
                    on_cell(planned, None)
                continue
            log.info("measuring %s", planned.label)
            before = hostload.sample()
            cell = measure_planned(planned)
            cell.measured_at = datetime.now(UTC).isoformat(timespec="microseconds")
            _note_host_load(cell, before, own_cores(planned, options))
            data.upsert(cell)
            data.save(path)
            result.measured.append(cell)
            if cell.status != "ok":
                log.warning("%s: %s (%s)", planned.label, cell.status, cell.reason)
            if on_cell is not None:
                on_cell(planned, cell)
    except KeyboardInterrupt:
        result.interrupted = True
    return result


@dataclass(frozen=True)
class Drift:
    """A re-timed cell: the file's steps/s, this run's, their ratio, and whether this run's
    host was busy (:mod:`schedlab.profiler.hostload`)."""

    key: str
    recorded: float
    now: float | None
    host_busy: str | None

    @property
    def ratio(self) -> float | None:
        return None if self.now is None else self.now / self.recorded


#: Relative change of a re-timed cell above which ``profile --check`` reports drift.
DRIFT_LIMIT = 0.10


def check_drift(path: str | Path, cells: int = 3,
                on_cell: Callable[[Drift], None] | None = None) -> list[Drift]:
    """Re-time up to ``cells`` of the file's ok solo / data-parallel cells (evenly spread
    over the file's order) with the file's own stopping rule and threads, and compare
    (``schedlab profile --check FILE``)."""
    from schedlab.profiler.zoo import parse_job_name

    data = load_throughputs(path)
    solo = [c for c in data.solo() if c.status == "ok" and c.steps_per_s]
    if not solo:
        raise InputError("has no measured (ok) solo cell to re-time", file=str(path),
                         field="cells")
    count = min(cells, len(solo))
    picked = [solo[round(i * (len(solo) - 1) / max(count - 1, 1))] for i in range(count)]
    out = []
    unique = list({cell.key: cell for cell in picked}.values())
    for cell in unique:
        before = hostload.sample()
        fresh = measure_scale_factor(
            parse_job_name(cell.job), cell.device, cell.backend, cell.scale_factor,
            settings=data.settings, threads=data.host.cpu_threads)
        busy = hostload.since(before,
                              float(cell.scale_factor * data.host.cpu_threads)).busy
        drift = Drift(key=cell.key, recorded=float(cell.steps_per_s or 0.0),
                      now=fresh.steps_per_s if fresh.status == "ok" else None,
                      host_busy=busy)
        out.append(drift)
        if on_cell is not None:
            on_cell(drift)
    return out
