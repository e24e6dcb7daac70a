r"""Switch-cost models of Hare's world: the idle gap sigma a GPU pays before it starts a task
of another job (docs/formulations/hare.md, "Switch models").

A switch on GPU g of type k from a task of job a to a task of job b (a != b) makes g idle at
least sigma[b, k] seconds (the incoming job's cost).  Three models give sigma from the incoming
job's **model**, the GPU **type**, the model's **memory** (its parameters, GB), the GPU's
**memory** (GB) and whether the model is already **resident** on the GPU:

* :class:`ColdRestart` (default scheme, no optimization): the worker process is restarted --
  CUDA context, framework, model construction -- and the parameters are copied to the GPU,

  .. math:: \sigma = \rho_m + M_m / B_k,

  with \rho_m the restart time of model m and B_k the effective host-to-device bandwidth of
  type k.  Residency does not help: the process that held the model is gone.
* :class:`Pipelined` (PipeSwitch-like): a standby worker is kept warm and the parameters are
  transferred layer group by layer group while the groups already loaded compute, so only the
  first group's load shows,

  .. math:: \sigma = c + f \, M_m / B_k,

  with c the fixed per-switch overhead and f the share of the parameters in the first group.
* :class:`HareStyle`: early task cleaning (each layer's intermediate data is freed once its
  backward pass ends, so the next task's data loads while the previous task finishes) plus
  speculative retention of recently used models (:func:`speculative_residency`).  A switch to
  a **resident** model costs \min(h_m, \sigma_{pipe}) -- milliseconds; Hare can always fall
  back to a pipelined load, so it never pays more --; a non-resident model is loaded as by
  :class:`Pipelined`.

**Defaults and their sources.**  The restart times \rho_m (:data:`COLD_RESTART_S`) and the
resident switch times h_m (:data:`HARE_RESIDENT_S`) are the seed poster's Table 1 (Hare,
HPDC'22, "Average task switching time of different jobs", rows *Default* and *Hare*), measured
on the authors' testbed for the eight models of the Hare workload.  The PipeSwitch overhead
c = 2.42 ms is that table's PipeSwitch time for GraphSAGE, a model of 1.3 MB whose transfer
takes 0.1 ms, so that figure is the overhead alone; f = 1/8 is our assumption (PipeSwitch
chooses its groups per model; replace f with a measurement).  With these numbers the models
reproduce Table 1's shape: default > 3 000 ms for every model, pipelined 2.4-8.2 ms on PCIe
3.0 GPUs (the table: 2.42-12.57 ms), Hare-style <= 5.8 ms (the table: <= 6 ms).

Bandwidths B_k (:data:`PCIE_GB_PER_S`) are the nominal per-direction rates of each type's host
link times an efficiency of :data:`PCIE_EFFICIENCY` = 0.8 (pinned host-to-device copies reach
about 80% of the nominal rate; our assumption): K80, P100, V100 and T4 have PCIe 3.0 x16
(NVIDIA's data sheets), 8 GT/s x 16 lanes x 128/130 = 15.75 GB/s; the A100 (PCIe card) has PCIe
4.0 x16, 31.5 GB/s.  GPU memories (:data:`GPU_MEMORY_GB`) are the data sheets' per-GPU memory:
K80 12 GB (24 GB per two-GPU board), P100 16 GB, V100 16 GB, T4 16 GB, A100 40 GB.  Model
memories (:data:`MODEL_MEMORY_GB`) are fp32 parameter bytes (4 bytes per parameter) of the
models' published sizes: VGG19 143.7 M parameters, ResNet-50 25.6 M, Inception-v3 27.2 M
(torchvision's model summaries), BERT-base 110 M (Devlin et al. 2019), Transformer base 65 M
(Vaswani et al. 2017, Table 3); DeepSpeech 47 M, FastGCN 0.08 M and GraphSAGE 0.33 M are our
counts from the architectures (DeepSpeech: Mozilla DeepSpeech's five layers of width 2048 with
one LSTM; FastGCN: two layers 602-128-41 on Reddit; GraphSAGE: two mean-aggregator layers
602-256-41 with concatenation).  Every number is a constructor argument, to be replaced by the
profiler's measurements.

**Measured costs** (:class:`MeasuredSwitch`, built by
:func:`schedlab.profiler.switch_costs.hare_switch_from_profile`: reading a profile is the
profiler's part, above the formulations that read the models here).  A
throughput file's switch cells (:mod:`schedlab.profiler.switching`, docs/switch-costs.md)
give, per zoo job and device, the measured seconds of a ``cold``, ``pipelined`` and
``resident`` switch (each including the first step).  Mapping each Hare model to a zoo job and
each GPU type to a profiled device replaces the formulas: the default model's sigma is the
cold time, the pipelined model's the pipelined time, and Hare's min(resident, pipelined) to a
resident model (the pipelined time otherwise).

Units: seconds, GB (1e9 bytes), GB/s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from schedlab.errors import InputError
from schedlab.instance import Instance

#: Host-to-device link rate per direction, GB/s (PCIe 3.0 x16: 15.75, PCIe 4.0 x16: 31.5).
PCIE_GB_PER_S: Mapping[str, float] = {
    "k80": 15.75, "p100": 15.75, "v100": 15.75, "t4": 15.75, "a100": 31.5,
}
#: Share of the nominal link rate a pinned host-to-device copy reaches (our assumption).
PCIE_EFFICIENCY = 0.8
#: Memory of one GPU, GB (NVIDIA data sheets; the K80 board holds two 12 GB GPUs).
GPU_MEMORY_GB: Mapping[str, float] = {
    "k80": 12.0, "p100": 16.0, "v100": 16.0, "t4": 16.0, "a100": 40.0,
}
#: fp32 parameter memory of the Hare workload's models, GB (module docstring).
MODEL_MEMORY_GB: Mapping[str, float] = {
    "VGG19": 143.67e6 * 4 / 1e9,
    "ResNet-50": 25.56e6 * 4 / 1e9,
    "Inception-v3": 27.16e6 * 4 / 1e9,
    "BERT-base": 110.0e6 * 4 / 1e9,
    "Transformer": 65.0e6 * 4 / 1e9,
    "DeepSpeech": 47.0e6 * 4 / 1e9,
    "FastGCN": 0.08e6 * 4 / 1e9,
    "GraphSAGE": 0.33e6 * 4 / 1e9,
}
#: Restart time of a cold switch, s: the seed's Table 1, row Default.
COLD_RESTART_S: Mapping[str, float] = {
    "VGG19": 3.28894, "ResNet-50": 5.96116, "Inception-v3": 7.80743, "BERT-base": 9.01699,
    "Transformer": 5.25717, "DeepSpeech": 5.12564, "FastGCN": 5.32724, "GraphSAGE": 5.21354,
}
#: Restart time of a model the table does not list, s (the seed: "more than 3000 ms").
FALLBACK_RESTART_S = 3.0
#: PipeSwitch's fixed per-switch overhead, s (Table 1, PipeSwitch, GraphSAGE).
PIPESWITCH_OVERHEAD_S = 2.42e-3
#: Share of a model's parameters in its first pipelined layer group (our assumption).
FIRST_GROUP_FRACTION = 1.0 / 8.0
#: Switch time to a resident model under Hare, s: the seed's Table 1, row Hare.
HARE_RESIDENT_S: Mapping[str, float] = {
    "VGG19": 2.77e-3, "ResNet-50": 2.04e-3, "Inception-v3": 2.46e-3, "BERT-base": 5.03e-3,
    "Transformer": 5.79e-3, "DeepSpeech": 4.27e-3, "FastGCN": 1.83e-3, "GraphSAGE": 0.96e-3,
}
#: Resident switch time of a model the table does not list, s (the row's largest value).
FALLBACK_HARE_RESIDENT_S = 5.79e-3
#: Share of a GPU's memory the running task is assumed to need; retained models share the
#: rest (:func:`speculative_residency`, our assumption).
TASK_MEMORY_SHARE = 0.5

SwitchKind = Literal["default", "pipelined", "hare"]
SWITCH_KINDS: tuple[SwitchKind, ...] = ("default", "pipelined", "hare")


@dataclass(frozen=True)
class SwitchContext:
    """What a switch's cost depends on: the incoming task's ``model``, the GPU ``gpu_type``,
    the model's parameter memory ``model_memory_gb``, the GPU's memory ``gpu_memory_gb`` and
    whether the model is ``resident`` on that GPU already."""

    model: str
    gpu_type: str
    model_memory_gb: float
    gpu_memory_gb: float
    resident: bool = False

    def __post_init__(self) -> None:
        for name in ("model_memory_gb", "gpu_memory_gb"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise InputError(f"{name} must be a finite number >= 0, got {value!r}",
                                 field=name)


class SwitchModel(Protocol):
    """A switch-cost model: seconds a GPU idles before a task of another job starts."""

    @property
    def name(self) -> str:
        """The model's kind ("default", "pipelined", "hare")."""
        ...

    def seconds(self, ctx: SwitchContext) -> float:
        """sigma in seconds for the switch described by ``ctx``."""
        ...


def _bandwidth(table: Mapping[str, float], efficiency: float, gpu_type: str) -> float:
    """Effective host-to-device bandwidth B_k = nominal rate x efficiency, GB/s."""
    key = gpu_type.lower()
    if key not in table:
        raise InputError(f"no host-link bandwidth for GPU type {gpu_type!r} "
                         f"(known: {', '.join(sorted(table))})", field="gpu_type")
    return table[key] * efficiency


@dataclass(frozen=True)
class ColdRestart:
    """Default switch: restart time rho_m plus the whole parameter copy M / B_k."""

    restart_s: Mapping[str, float] = field(default_factory=lambda: dict(COLD_RESTART_S))
    fallback_restart_s: float = FALLBACK_RESTART_S
    bandwidth_gb_per_s: Mapping[str, float] = field(default_factory=lambda: dict(PCIE_GB_PER_S))
    efficiency: float = PCIE_EFFICIENCY
    name: str = "default"

    def seconds(self, ctx: SwitchContext) -> float:
        """rho_m + M_m / B_k (residency ignored: the process that held the model is gone)."""
        restart = self.restart_s.get(ctx.model, self.fallback_restart_s)
        bandwidth = _bandwidth(self.bandwidth_gb_per_s, self.efficiency, ctx.gpu_type)
        return restart + ctx.model_memory_gb / bandwidth


@dataclass(frozen=True)
class Pipelined:
    """PipeSwitch-like switch: overhead c plus the first layer group's load f M / B_k."""

    overhead_s: float = PIPESWITCH_OVERHEAD_S
    first_group_fraction: float = FIRST_GROUP_FRACTION
    bandwidth_gb_per_s: Mapping[str, float] = field(default_factory=lambda: dict(PCIE_GB_PER_S))
    efficiency: float = PCIE_EFFICIENCY
    name: str = "pipelined"

    def __post_init__(self) -> None:
        if not 0.0 < self.first_group_fraction <= 1.0:
            raise InputError("first_group_fraction must lie in (0, 1]",
                             field="first_group_fraction")

    def seconds(self, ctx: SwitchContext) -> float:
        """c + f M_m / B_k (residency ignored: PipeSwitch reloads the parameters)."""
        bandwidth = _bandwidth(self.bandwidth_gb_per_s, self.efficiency, ctx.gpu_type)
        return self.overhead_s + self.first_group_fraction * ctx.model_memory_gb / bandwidth


@dataclass(frozen=True)
class HareStyle:
    """Hare's switch: min(h_m, pipelined) to a resident model, pipelined otherwise."""

    resident_s: Mapping[str, float] = field(default_factory=lambda: dict(HARE_RESIDENT_S))
    fallback_resident_s: float = FALLBACK_HARE_RESIDENT_S
    pipelined: Pipelined = field(default_factory=Pipelined)
    name: str = "hare"

    def seconds(self, ctx: SwitchContext) -> float:
        """Resident: min(h_m, sigma_pipe); not resident: sigma_pipe."""
        load = self.pipelined.seconds(ctx)
        if not ctx.resident:
            return load
        return min(self.resident_s.get(ctx.model, self.fallback_resident_s), load)


@dataclass(frozen=True)
class MeasuredSwitch:
    """sigma from measured seconds per (model, GPU type) instead of the formulas.

    ``load_s[(model, type)]`` is the switch to a model that is not resident (or to any model
    when ``resident_s`` is None); with ``resident_s``, a switch to a resident model costs
    min(resident_s, load_s) (Hare's rule of :class:`HareStyle`).  GPU types are lower case.
    A (model, type) the tables do not hold is an :class:`~schedlab.errors.InputError`."""

    load_s: Mapping[tuple[str, str], float]
    resident_s: Mapping[tuple[str, str], float] | None = None
    name: str = "default"

    def _lookup(self, table: Mapping[tuple[str, str], float], ctx: SwitchContext) -> float:
        key = (ctx.model, ctx.gpu_type.lower())
        if key not in table:
            known = ", ".join(sorted(f"{m} on {k}" for m, k in table))
            raise InputError(f"no measured switch for model {ctx.model!r} on GPU type "
                             f"{ctx.gpu_type!r} (known: {known})", field="switch_profile")
        return table[key]

    def seconds(self, ctx: SwitchContext) -> float:
        """The measured load; min(resident, load) to a resident model when ``resident_s``."""
        load = self._lookup(self.load_s, ctx)
        if self.resident_s is None or not ctx.resident:
            return load
        return min(self._lookup(self.resident_s, ctx), load)


def switch_model(kind: SwitchKind) -> SwitchModel:
    """The model of ``kind`` with its documented defaults."""
    if kind == "default":
        return ColdRestart()
    if kind == "pipelined":
        return Pipelined()
    if kind == "hare":
        return HareStyle()
    raise InputError(f"unknown switch model {kind!r} (known: {', '.join(SWITCH_KINDS)})",
                     field="switch_model")


def can_retain(model_memory_gb: float, gpu_memory_gb: float,
               task_share: float = TASK_MEMORY_SHARE) -> bool:
    """Whether a model can stay resident next to a running task: M <= (1 - share) x GPU memory."""
    return model_memory_gb <= (1.0 - task_share) * gpu_memory_gb


def speculative_residency(
    recent_models: Sequence[str],
    model_memory_gb: Mapping[str, float],
    gpu_memory_gb: float,
    task_share: float = TASK_MEMORY_SHARE,
) -> set[str]:
    """Models kept in a GPU's memory by Hare's speculative memory management.

    The next task has priority: it is given ``task_share`` of the GPU's memory; the rest keeps
    the models of the latest completed tasks, most recent first (``recent_models`` is in
    completion order, the latest last), each added while it still fits, until one does not
    ("greedily keeps models of latest completed tasks until they cannot be accommodated").
    A model that appears twice is kept once.
    """
    budget = (1.0 - task_share) * gpu_memory_gb
    kept: set[str] = set()
    used = 0.0
    for model in reversed(recent_models):
        if model in kept:
            continue
        need = model_memory_gb[model]
        if used + need > budget:
            break
        kept.add(model)
        used += need
    return kept


def job_model(job_type: str | None, job_id: str) -> str:
    """The model name of a Hare job: its ``job_type`` up to the first ' (' (a batch-size
    label), else its id."""
    label = job_type or job_id
    return label.split(" (", 1)[0]


def switch_seconds_for(
    model: SwitchModel,
    model_name: str,
    model_memory_gb: float,
    types: Iterable[str],
    gpu_memory_gb: Mapping[str, float],
    *,
    resident: bool = True,
) -> dict[str, float]:
    """{type: sigma} for one job's model on ``types``; ``resident`` as in
    :func:`switch_seconds_map`.  Raises InputError for a type without GPU memory."""
    row: dict[str, float] = {}
    for k in types:
        key = k.lower()
        if key not in gpu_memory_gb:
            raise InputError(f"no GPU memory for type {k!r}", field="gpu_type")
        ctx = SwitchContext(
            model=model_name, gpu_type=key, model_memory_gb=model_memory_gb,
            gpu_memory_gb=gpu_memory_gb[key],
            resident=resident and can_retain(model_memory_gb, gpu_memory_gb[key]),
        )
        row[k] = model.seconds(ctx)
    return row


def switch_seconds_map(
    instance: Instance,
    model: SwitchModel,
    *,
    model_memory_gb: Mapping[str, float] | None = None,
    gpu_memory_gb: Mapping[str, float] | None = None,
    resident: bool = True,
    jobs: Iterable[str] | None = None,
) -> dict[str, dict[str, float]]:
    """sigma[j][k] in seconds for the instance's jobs on the GPU types each can use.

    The job's model is :func:`job_model` of its ``job_type``; its memory is the job's
    ``model_memory_gb`` when set, else the model's entry in ``model_memory_gb`` (default
    :data:`MODEL_MEMORY_GB`).  ``resident=True`` assumes the
    incoming model was kept by speculative retention whenever :func:`can_retain` allows it on
    that type (the steady state of a GPU that alternates among few jobs); ``resident=False``
    charges every switch as a load.  The types a job can use are its ``task_seconds`` keys
    (all the cluster's types when it has none).  Raises InputError for a model without a
    memory entry or a GPU type without memory or bandwidth.
    """
    memories = dict(MODEL_MEMORY_GB if model_memory_gb is None else model_memory_gb)
    gpu_mem = dict(GPU_MEMORY_GB if gpu_memory_gb is None else gpu_memory_gb)
    wanted = None if jobs is None else set(jobs)
    out: dict[str, dict[str, float]] = {}
    for i, job in enumerate(instance.jobs):
        if wanted is not None and job.id not in wanted:
            continue
        name = job_model(job.job_type, job.id)
        memory = job.model_memory_gb if job.model_memory_gb is not None else memories.get(name)
        if memory is None:
            raise InputError(f"no model memory for {name!r} (job {job.id!r})",
                             field=f"jobs[{i}].model_memory_gb")
        types = list(job.task_seconds) if job.task_seconds else instance.cluster.types
        try:
            row = switch_seconds_for(model, name, memory, types, gpu_mem, resident=resident)
        except InputError as error:
            raise InputError(error.reason, field=f"jobs[{i}].task_seconds") from None
        out[job.id] = row
    return out
