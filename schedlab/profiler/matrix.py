"""The throughput-matrix file (``schedlab/throughputs@1``): what the profiler measured.

One JSON file holds every measurement of one profiling campaign, one entry ("cell") per
thing measured, so a run can stop at any cell and resume (:func:`upsert` replaces the cell
with the same :attr:`key`).  Units are in the field names: ``_s`` seconds, ``_per_s`` per
second, ``_bytes`` bytes.  The field-by-field description is in docs/profiler.md; the JSON
Schema is printed by ``schedlab schema throughputs``.

* :class:`Measurement` - one zoo job (``model/size@batch``) on ``scale_factor`` devices of
  one type: steps/s with its confidence interval, peak memory.  ``scale_factor`` > 1 is data
  parallel (DistributedDataParallel, gloo on CPU, NCCL on CUDA); steps/s counts *global*
  steps (each of ``batch_size`` x ``scale_factor`` samples, as Gavel's throughputs).
* :class:`ColocatedMeasurement` - two jobs on one device at once (Gavel's space sharing):
  each job's steps/s while the other runs.
* :class:`RegimeMeasurement` - Shockwave's batch-size regimes: seconds per epoch of
  ``samples_per_epoch`` samples at each batch size.
* :class:`TechniqueMeasurement` - Saturn's technique search: step time of one technique on
  ``gpus`` devices, or infeasible with the reason.
* :class:`SwitchMeasurement` - seconds to switch a device to a job: ``cold`` (new process,
  build, load checkpoint, first step), ``warm`` (live worker, ``load_state_dict``, first step),
  ``pipelined`` (stage-by-stage load overlapped with the first forward pass), ``resident``
  (Hare-style: the model is kept resident and the finished task's activations were freed
  early; only the optimizer state is swapped in).
"""

from __future__ import annotations

import platform
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schedlab.atomic import write_json_atomic
from schedlab.documents import read_document
from schedlab.errors import InputError

THROUGHPUTS_SCHEMA = "schedlab/throughputs@1"

CellStatus = Literal["ok", "infeasible", "error"]
SwitchKind = Literal["cold", "warm", "pipelined", "resident"]
SWITCH_KINDS: tuple[str, ...] = ("cold", "warm", "pipelined", "resident")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Host(_Model):
    """Where the measurements were taken."""

    hostname: str = ""
    platform: str = ""
    python: str = ""
    torch: str = ""
    cpu_threads: int = Field(default=1, ge=1, description="torch threads per worker process")
    devices: dict[str, str] = Field(
        default_factory=dict, description="device label -> what it is (e.g. 'cpu' -> the "
        "processor, 'h100' -> 'NVIDIA H100 80GB HBM3 (cuda:0)')")


class Settings(_Model):
    """How steps were timed (the stopping rule of :mod:`schedlab.profiler.timing`)."""

    warmup_steps: int = Field(default=3, ge=0)
    min_steps: int = Field(default=5, ge=2)
    max_steps: int = Field(default=200, ge=2)
    max_seconds: float = Field(default=10.0, gt=0,
                               description="time limit of one cell's timed phase")
    confidence: float = Field(default=0.95, gt=0, lt=1)
    target_relative_halfwidth: float = Field(
        default=0.05, gt=0,
        description="stop when the CI half-width / mean step time is below this")
    busy_neighbours: bool = Field(
        default=False,
        description="CPU: every CPU device a cell did not use ran the same job, untimed, "
        "while the cell was timed (as in a replay that keeps every device busy)")


class _Cell(_Model):
    status: CellStatus = "ok"
    reason: str | None = Field(default=None, description="why infeasible or error")
    measured_at: str = ""
    load_average: float | None = Field(
        default=None, ge=0, description="the host's 1-minute load average after the cell")
    foreign_cores: float | None = Field(
        default=None, ge=0, description="cores' worth of CPU time other processes used while "
        "the cell ran (schedlab.profiler.hostload)")
    host_busy: str | None = Field(
        default=None, description="why the host counted as busy during the cell (a warning: "
        "the value may be wrong), or null")


class Measurement(_Cell):
    """Job ``job`` on ``scale_factor`` devices labelled ``device``."""

    kind: Literal["solo"] = "solo"
    job: str = Field(description="zoo job, model/size@batch")
    device: str = Field(description="device label: the accelerator type in instances")
    backend: Literal["cpu", "cuda"] = "cpu"
    scale_factor: int = Field(default=1, ge=1)
    steps_per_s: float | None = Field(default=None, ge=0,
                                      description="global optimizer steps per s")
    steps_per_s_ci: tuple[float, float] | None = Field(
        default=None, description="confidence interval of steps_per_s (Settings.confidence)")
    samples_per_s: float | None = Field(default=None, ge=0)
    steps_timed: int = Field(default=0, ge=0)
    peak_memory_bytes: int | None = Field(default=None, ge=0, description="per process / device")

    @property
    def key(self) -> str:
        return f"solo:{self.job}:{self.device}:{self.scale_factor}"


class ColocatedMeasurement(_Cell):
    """Jobs ``jobs[0]`` and ``jobs[1]`` sharing one device: each one's steps/s."""

    kind: Literal["colocated"] = "colocated"
    jobs: tuple[str, str]
    device: str
    backend: Literal["cpu", "cuda"] = "cpu"
    steps_per_s: tuple[float, float] | None = None
    steps_per_s_ci: tuple[tuple[float, float], tuple[float, float]] | None = None

    @property
    def key(self) -> str:
        return f"colocated:{self.jobs[0]}+{self.jobs[1]}:{self.device}"


class RegimeMeasurement(_Cell):
    """Seconds per epoch of ``samples_per_epoch`` samples for ``model/size`` at ``batch_size``."""

    kind: Literal["regime"] = "regime"
    model: str = Field(description="zoo model/size")
    device: str
    backend: Literal["cpu", "cuda"] = "cpu"
    batch_size: int = Field(ge=1)
    samples_per_epoch: int = Field(ge=1)
    seconds_per_epoch: float | None = Field(default=None, gt=0)
    step_s: float | None = Field(default=None, gt=0, description="measured mean seconds per "
                                 "step; seconds_per_epoch = ceil(samples / batch) x step_s")

    @property
    def key(self) -> str:
        return f"regime:{self.model}@{self.batch_size}:{self.device}:{self.samples_per_epoch}"


class TechniqueMeasurement(_Cell):
    """Saturn's search: ``technique`` for ``job`` on ``gpus`` devices."""

    kind: Literal["technique"] = "technique"
    job: str
    device: str
    backend: Literal["cpu", "cuda"] = "cpu"
    technique: str
    gpus: int = Field(ge=1)
    step_s: float | None = Field(default=None, gt=0, description="seconds per global step")
    peak_memory_bytes: int | None = Field(default=None, ge=0)

    @property
    def key(self) -> str:
        return f"technique:{self.job}:{self.device}:{self.technique}:{self.gpus}"


class SwitchMeasurement(_Cell):
    """Seconds to make ``device`` ready to run a step of ``job`` (see module docstring)."""

    kind: Literal["switch"] = "switch"
    job: str
    device: str
    backend: Literal["cpu", "cuda"] = "cpu"
    switch: SwitchKind
    seconds: float | None = Field(default=None, ge=0, description="mean over the repeats")
    seconds_ci: tuple[float, float] | None = None
    repeats: int = Field(default=0, ge=0)
    checkpoint_bytes: int | None = Field(default=None, ge=0)

    @property
    def key(self) -> str:
        return f"switch:{self.job}:{self.device}:{self.switch}"


Cell = (Measurement | ColocatedMeasurement | RegimeMeasurement | TechniqueMeasurement
        | SwitchMeasurement)


class ThroughputFile(_Model):
    """A profiling campaign's measurements (see the module docstring)."""

    schema_: Literal["schedlab/throughputs@1"] = Field(default="schedlab/throughputs@1",
                                                        alias="schema")
    host: Host = Field(default_factory=Host)
    settings: Settings = Field(default_factory=Settings)
    cells: list[Annotated[Cell, Field(discriminator="kind")]] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def get(self, key: str) -> Cell | None:
        """The cell with ``key``, or None."""
        for cell in self.cells:
            if cell.key == key:
                return cell
        return None

    def upsert(self, cell: Cell) -> None:
        """Add ``cell``, replacing the cell with the same key."""
        if not cell.measured_at:
            cell.measured_at = datetime.now(UTC).isoformat(timespec="seconds")
        for index, old in enumerate(self.cells):
            if old.key == cell.key:
                self.cells[index] = cell
                return
        self.cells.append(cell)

    def solo(self) -> list[Measurement]:
        """The solo / data-parallel measurements."""
        return [c for c in self.cells if isinstance(c, Measurement)]

    def throughput(self, job: str, device: str, scale_factor: int = 1) -> float | None:
        """steps/s of ``job`` on ``scale_factor`` x ``device``, None when not measured ok."""
        cell = self.get(f"solo:{job}:{device}:{scale_factor}")
        if isinstance(cell, Measurement) and cell.status == "ok":
            return cell.steps_per_s
        return None

    def switch_seconds(self, job: str, device: str, kind: str) -> float | None:
        """Measured seconds of a ``kind`` switch to ``job`` on ``device`` (None: not measured)."""
        cell = self.get(f"switch:{job}:{device}:{kind}")
        if isinstance(cell, SwitchMeasurement) and cell.status == "ok":
            return cell.seconds
        return None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def save(self, path: str | Path) -> None:
        """Write atomically (a reader never sees half a file)."""
        write_json_atomic(path, self.to_dict())


def current_host(cpu_threads: int, devices: dict[str, str] | None = None) -> Host:
    """This machine, for a new file."""
    import torch

    return Host(hostname=socket.gethostname(), platform=platform.platform(),
                python=platform.python_version(), torch=str(torch.__version__),
                cpu_threads=cpu_threads, devices=dict(devices or {}))


def load_throughputs(path: str | Path) -> ThroughputFile:
    """Read and validate a throughput file; one :class:`InputError` naming the field."""
    data = read_document(path)
    try:
        return ThroughputFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        raise InputError(str(err.get("msg")), file=str(path), field=loc or None) from None


def throughputs_json_schema() -> dict[str, Any]:
    """JSON Schema of the throughput file."""
    schema = ThroughputFile.model_json_schema(by_alias=True)
    schema["$id"] = THROUGHPUTS_SCHEMA
    return schema
