"""Parallelism techniques: Saturn's template, and an analytic runtime / memory estimator.

Saturn (Nagrecha & Kumar, VLDB'24) wraps each way of running one large model on g GPUs
(DDP, FSDP, pipelining, spilling ...) behind one template: a technique can *estimate* or
profile its runtime on g GPUs, and can *run* a training job.  This module is that template
plus an analytic cost model, so realistic SPASE instances (``Job.configs``) can be built
without a GPU.  The formulas and a feasibility table are in ``docs/parallelism.md``.

Notation (units in brackets): P parameters, L layers, h hidden size, a attention heads,
s sequence length [tokens], V vocabulary size, B global batch [samples per optimizer step],
b micro-batch [samples], E epochs, g GPUs, F = peak TFLOPS x achievable fraction [FLOP/s],
W intra-node bus bandwidth [bytes/s], W_pcie host <-> GPU bandwidth [bytes/s].
GB means 10^9 bytes everywhere.

Shared model (every built-in technique):

* FLOPs per sample = c P s with c = 6 (forward 2, backward 4) or c = 8 with activation
  checkpointing (one more forward).  Attention's s^2 term and the optimizer step are ignored.
* Model states: ``state_bytes_per_param`` = 16 bytes/param (mixed-precision Adam: fp16
  weights 2 + fp16 gradients 2 + fp32 master weights, momentum and variance 4 + 4 + 4).
* Activations of one micro-batch of b samples, one transformer layer, no recomputation
  (Korthikanti et al. 2022, eq. 1, 16-bit): A_layer(b) = b s h (34 + 5 a s / h) bytes.
  With checkpointing only each layer's input is kept, 2 b s h bytes per layer, plus one
  layer's A_layer(b) while it is recomputed.  The fp32 logits add 4 b s V bytes.
* Runtime = steps x step time, steps = E ceil(ceil(T_epoch / s) / B) (T_epoch tokens).
  Communication is not overlapped with compute (a conservative, simple choice).
* A configuration is feasible when the memory per GPU is at most the GPU's usable memory
  (``memory_gb - reserved_gb``, reserved for the CUDA context and allocator slack), and
  spilling's host copy fits in the node's host memory.
"""

from __future__ import annotations

import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from schedlab.errors import InputError, SchedlabError, UnknownNameError

if TYPE_CHECKING:
    from schedlab.instance import SaturnConfig

#: The module's name before it moved here: log lines keep their logger name.
log = logging.getLogger("schedlab.profiler.parallelism")

GB = 1e9
"""Bytes per GB (decimal, as in the brief's hand arithmetic: 16 B x 6e9 = 96 GB)."""

#: Mixed-precision Adam: fp16 weights (2) + fp16 grads (2) + fp32 master, m, v (4 + 4 + 4).
ADAM_MIXED_PRECISION_BYTES = 16.0
#: Bytes per fp16 / bf16 value (weights, gradients, activations on the wire).
HALF_BYTES = 2.0
#: Bytes per fp32 logit kept for the loss.
LOGIT_BYTES = 4.0
#: Default GPU counts a configuration list spans.
DEFAULT_GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8)

T = TypeVar("T")


# ----------------------------------------------------------------------------- specs


def _positive(owner: str, **values: float) -> None:
    for key, value in values.items():
        if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            raise InputError(f"{owner}: {key} must be a positive finite number, got {value!r}")


@dataclass(frozen=True)
class ModelSpec:
    """A transformer model, as far as the cost model needs it.

    Attributes:
        name: label used in job ids ("gptj-6b").
        parameters: P, number of parameters (count, not bytes).
        layers: L, transformer blocks (a pipeline has at most L stages).
        hidden_size: h.
        heads: a, attention heads.
        sequence_length: s, tokens per sample during fine-tuning.
        vocab_size: V (the logits of the loss take 4 b s V bytes).
    """

    name: str
    parameters: float
    layers: int
    hidden_size: int
    heads: int
    sequence_length: int
    vocab_size: int = 50257

    def __post_init__(self) -> None:
        _positive(f"model {self.name!r}", parameters=self.parameters, layers=self.layers,
                  hidden_size=self.hidden_size, heads=self.heads,
                  sequence_length=self.sequence_length, vocab_size=self.vocab_size)


@dataclass(frozen=True)
class JobSpec:
    """One training job: a model, its batch sizes and how much data it sees.

    Attributes:
        model: the :class:`ModelSpec`.
        batch_size: B, samples per optimizer step (global, over all GPUs).
        micro_batch_size: b, samples per forward/backward pass on one GPU; a GPU runs
            ceil(samples it owns / b) micro-batches per step (gradient accumulation).
        tokens_per_epoch: tokens of the training set; samples per epoch = ceil(tokens / s).
        epochs: E.
        learning_rate: recorded for labels only; **it does not change the estimated runtime**.
        activation_checkpointing: keep only layer inputs and recompute (c = 8 instead of 6).
        state_bytes_per_param: bytes of weights + gradients + optimizer state per parameter.
    """

    model: ModelSpec
    batch_size: int
    micro_batch_size: int = 1
    tokens_per_epoch: float = 2.4e6
    epochs: int = 1
    learning_rate: float | None = None
    activation_checkpointing: bool = True
    state_bytes_per_param: float = ADAM_MIXED_PRECISION_BYTES

    def __post_init__(self) -> None:
        _positive(f"job of {self.model.name!r}", batch_size=self.batch_size,
                  micro_batch_size=self.micro_batch_size, tokens_per_epoch=self.tokens_per_epoch,
                  epochs=self.epochs, state_bytes_per_param=self.state_bytes_per_param)
        if self.micro_batch_size > self.batch_size:
            raise InputError(
                f"job of {self.model.name!r}: micro_batch_size {self.micro_batch_size} exceeds "
                f"batch_size {self.batch_size}"
            )

    @property
    def samples_per_epoch(self) -> int:
        """ceil(tokens_per_epoch / s)."""
        return math.ceil(self.tokens_per_epoch / self.model.sequence_length)

    @property
    def steps(self) -> int:
        """Optimizer steps in all: E ceil(samples per epoch / B) (the last batch is padded)."""
        return self.epochs * math.ceil(self.samples_per_epoch / self.batch_size)

    @property
    def flops_per_sample(self) -> float:
        """c P s FLOPs, c = 8 with activation checkpointing, else 6."""
        c = 8.0 if self.activation_checkpointing else 6.0
        return c * self.model.parameters * self.model.sequence_length

    @property
    def state_bytes(self) -> float:
        """Model states of the whole model, bytes: state_bytes_per_param x P."""
        return self.state_bytes_per_param * self.model.parameters

    @property
    def layer_parameters(self) -> float:
        """P / L, parameters of one layer (embeddings spread over the layers)."""
        return self.model.parameters / self.model.layers

    def layer_activation_bytes(self, micro_batch: int) -> float:
        """A_layer(b) = b s h (34 + 5 a s / h) bytes: one layer, no recomputation."""
        m = self.model
        return micro_batch * m.sequence_length * m.hidden_size * (
            34.0 + 5.0 * m.heads * m.sequence_length / m.hidden_size
        )

    def stored_activation_bytes(self, micro_batch: int, layers: int) -> float:
        """Activations kept between forward and backward for ``layers`` layers, bytes.

        Checkpointing: 2 b s h per layer (its fp16 input); otherwise layers x A_layer(b).
        """
        if self.activation_checkpointing:
            m = self.model
            return HALF_BYTES * micro_batch * m.sequence_length * m.hidden_size * layers
        return layers * self.layer_activation_bytes(micro_batch)

    def working_activation_bytes(self, micro_batch: int) -> float:
        """Transient activations of one micro-batch, bytes: the layer being recomputed
        (A_layer(b), checkpointing only) plus the fp32 logits 4 b s V."""
        logits = LOGIT_BYTES * micro_batch * self.model.sequence_length * self.model.vocab_size
        recompute = self.layer_activation_bytes(micro_batch) if self.activation_checkpointing \
            else 0.0
        return recompute + logits

    def activation_bytes(self, micro_batch: int) -> float:
        """All activations of one micro-batch through the whole model, bytes."""
        return (self.stored_activation_bytes(micro_batch, self.model.layers)
                + self.working_activation_bytes(micro_batch))


@dataclass(frozen=True)
class GpuSpec:
    """A GPU model and the node it sits in.

    Attributes:
        name: accelerator name used in instances ("a100-80gb").
        memory_gb: device memory, GB (10^9 bytes).
        peak_tflops: dense fp16/bf16 tensor-core peak, TFLOPS.
        achievable_fraction: share of the peak a large transformer reaches (hardware FLOPs
            utilization), so F = peak_tflops x achievable_fraction x 10^12 FLOP/s.
        interconnect_gb_s: W, intra-node collective bus bandwidth per GPU (NVLink), GB/s.
        pcie_gb_s: W_pcie, host <-> GPU bandwidth of one GPU, GB/s.
        host_memory_gb: CPU memory of the node that holds the GPU, GB (spilling's limit).
        reserved_gb: device memory unavailable to the model (CUDA context, allocator slack).
    """

    name: str
    memory_gb: float
    peak_tflops: float
    achievable_fraction: float = 0.4
    interconnect_gb_s: float = 200.0
    pcie_gb_s: float = 25.0
    host_memory_gb: float = 1024.0
    reserved_gb: float = 2.0

    def __post_init__(self) -> None:
        _positive(f"GPU {self.name!r}", memory_gb=self.memory_gb, peak_tflops=self.peak_tflops,
                  achievable_fraction=self.achievable_fraction,
                  interconnect_gb_s=self.interconnect_gb_s, pcie_gb_s=self.pcie_gb_s,
                  host_memory_gb=self.host_memory_gb)
        if not 0 < self.achievable_fraction <= 1:
            raise InputError(f"GPU {self.name!r}: achievable_fraction must be in (0, 1]")
        if not 0 <= self.reserved_gb < self.memory_gb:
            raise InputError(f"GPU {self.name!r}: reserved_gb must be in [0, memory_gb)")

    @property
    def flops_per_s(self) -> float:
        """F = peak x achievable fraction, FLOP/s."""
        return self.peak_tflops * 1e12 * self.achievable_fraction

    @property
    def usable_bytes(self) -> float:
        """(memory_gb - reserved_gb) x 10^9 bytes."""
        return (self.memory_gb - self.reserved_gb) * GB


#: Published models (parameter counts and shapes from their model cards / papers).
MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("gpt2-1.5b", 1.558e9, layers=48, hidden_size=1600, heads=25,
                  sequence_length=1024, vocab_size=50257),
        ModelSpec("gpt-neo-2.7b", 2.7e9, layers=32, hidden_size=2560, heads=20,
                  sequence_length=2048, vocab_size=50257),
        ModelSpec("gptj-6b", 6.05e9, layers=28, hidden_size=4096, heads=16,
                  sequence_length=2048, vocab_size=50400),
    )
}

#: GPUs: memory and dense fp16 tensor peak from NVIDIA's data sheets; achievable fraction,
#: NCCL bus bandwidth, PCIe and host memory (DGX-1 / DGX A100 nodes) are typical values.
GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec("v100-16gb", 16.0, 125.0, 0.35, interconnect_gb_s=100.0, pcie_gb_s=12.0,
                host_memory_gb=512.0),
        GpuSpec("v100-32gb", 32.0, 125.0, 0.35, interconnect_gb_s=100.0, pcie_gb_s=12.0,
                host_memory_gb=512.0),
        GpuSpec("a100-40gb", 40.0, 312.0, 0.45, interconnect_gb_s=200.0, pcie_gb_s=25.0,
                host_memory_gb=1024.0),
        GpuSpec("a100-80gb", 80.0, 312.0, 0.45, interconnect_gb_s=200.0, pcie_gb_s=25.0,
                host_memory_gb=2048.0),
    )
}


def get_model(name: str | ModelSpec) -> ModelSpec:
    """The model ``name`` of :data:`MODELS` (a ModelSpec passes through)."""
    if isinstance(name, ModelSpec):
        return name
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownNameError(f"unknown model {name!r} (known: {sorted(MODELS)})") from None


def get_gpu(name: str | GpuSpec) -> GpuSpec:
    """The GPU ``name`` of :data:`GPUS` (a GpuSpec passes through)."""
    if isinstance(name, GpuSpec):
        return name
    try:
        return GPUS[name]
    except KeyError:
        raise UnknownNameError(f"unknown GPU {name!r} (known: {sorted(GPUS)})") from None


# ----------------------------------------------------------------------------- estimates


@dataclass(frozen=True)
class StepTime:
    """Seconds per optimizer step, split into compute and communication (not overlapped)."""

    compute_s: float
    communication_s: float = 0.0
    bubble_fraction: float = 0.0

    @property
    def total_s(self) -> float:
        """compute_s + communication_s."""
        return self.compute_s + self.communication_s


@dataclass(frozen=True)
class Estimate:
    """What a technique predicts for one job on ``gpus`` GPUs.

    ``runtime_s`` (whole job, s) is the cost model's value even when ``feasible`` is False
    (what it would take were memory no limit); ``reason`` says why it is infeasible.
    ``memory_gb`` is per GPU; ``host_memory_gb`` is node host memory (spilling).
    """

    technique: str
    gpus: int
    runtime_s: float
    memory_gb: float
    feasible: bool
    reason: str = ""
    compute_s: float = 0.0
    communication_s: float = 0.0
    bubble_fraction: float = 0.0
    host_memory_gb: float = 0.0

    def to_config(self, *, digits: int | None = None) -> SaturnConfig:
        """This estimate as an instance's :class:`~schedlab.instance.SaturnConfig`
        (runtime and memory rounded to ``digits`` decimals when given)."""
        runtime, memory = self.runtime_s, self.memory_gb
        if digits is not None:
            runtime, memory = round(runtime, digits), round(memory, digits)
        from schedlab.instance import SaturnConfig

        return SaturnConfig(technique=self.technique, gpus=self.gpus, runtime_s=runtime,
                            feasible=self.feasible, memory_gb=memory)


# ----------------------------------------------------------------------------- execution


class TechniqueUnavailableError(SchedlabError):
    """A technique cannot run here (no GPUs, too few GPUs, or not in-process)."""


@dataclass(frozen=True)
class RunContext:
    """What a training callable receives from :meth:`ParallelismTechnique.run`.

    ``device`` is ``"cpu"`` or ``"cuda:N"``; ``prepare(model)`` places the model as the
    technique requires (default: ``model.to(device)``).
    """

    technique: ParallelismTechnique
    gpus: int
    device: str
    rank: int = 0
    world_size: int = 1

    def prepare(self, model: Any) -> Any:
        """The model placed for this technique (see :meth:`ParallelismTechnique.prepare_model`)."""
        return self.technique.prepare_model(model, self)


@dataclass(frozen=True)
class RunResult(Generic[T]):
    """The training callable's return ``value`` and its wall time, s."""

    value: T
    wall_s: float
    technique: str
    gpus: int
    device: str


def local_cuda_devices() -> int:
    """CUDA devices visible to this process (0 when torch is not installed)."""
    try:
        import torch  # optional dependency, imported only when asked
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


# ----------------------------------------------------------------------------- template


class ParallelismTechnique(ABC):
    """Saturn's template for a parallelism technique.

    Subclasses set ``name`` (and ``min_gpus`` / ``max_gpus``) and implement the cost model:
    :meth:`memory_per_gpu_bytes` and :meth:`step_time` (and :meth:`host_memory_bytes` when
    the technique keeps state in host memory).  :meth:`estimate` combines them; override it
    to plug in a profiler instead.  :meth:`run` executes a training callable.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    min_gpus: ClassVar[int] = 1
    max_gpus: ClassVar[int | None] = None

    def applicable(self, job: JobSpec, gpus: int) -> bool:
        """Whether ``gpus`` GPUs is a configuration of this technique at all."""
        return gpus >= self.min_gpus and (self.max_gpus is None or gpus <= self.max_gpus)

    @abstractmethod
    def memory_per_gpu_bytes(self, job: JobSpec, gpus: int) -> float:
        """Peak device memory per GPU, bytes."""

    @abstractmethod
    def step_time(self, job: JobSpec, gpus: int, gpu: GpuSpec) -> StepTime:
        """Seconds per optimizer step."""

    def host_memory_bytes(self, job: JobSpec, gpus: int) -> float:
        """Node host memory the technique needs, bytes (0: none beyond the usual)."""
        return 0.0

    def estimate(self, job: JobSpec, gpus: int, gpu: GpuSpec) -> Estimate | None:
        """Runtime and memory of ``job`` on ``gpus`` GPUs of type ``gpu``.

        Returns None when ``gpus`` is not a configuration of this technique (e.g. ``single``
        on 2 GPUs), and an Estimate with ``feasible=False`` and a ``reason`` when it is one
        but does not fit: memory per GPU > usable GPU memory, or host memory exceeded.
        """
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise InputError(f"gpus must be a positive integer, got {gpus!r}")
        if not self.applicable(job, gpus):
            return None
        memory = self.memory_per_gpu_bytes(job, gpus)
        host = self.host_memory_bytes(job, gpus)
        step = self.step_time(job, gpus, gpu)
        runtime = job.steps * step.total_s
        if not (math.isfinite(runtime) and runtime >= 0 and math.isfinite(memory)):
            raise SchedlabError(
                f"technique {self.name!r} estimated runtime {runtime!r} s and memory "
                f"{memory!r} bytes for {job.model.name!r} on {gpus} GPUs"
            )
        reasons: list[str] = []
        if memory > gpu.usable_bytes:
            reasons.append(
                f"needs {memory / GB:.1f} GB per GPU > {gpu.usable_bytes / GB:.1f} GB usable "
                f"on {gpu.name}"
            )
        if host > gpu.host_memory_gb * GB:
            reasons.append(
                f"needs {host / GB:.1f} GB host memory > {gpu.host_memory_gb:.0f} GB per node"
            )
        return Estimate(
            technique=self.name, gpus=gpus, runtime_s=runtime, memory_gb=memory / GB,
            feasible=not reasons, reason="; ".join(reasons),
            compute_s=job.steps * step.compute_s,
            communication_s=job.steps * step.communication_s,
            bubble_fraction=step.bubble_fraction, host_memory_gb=host / GB,
        )

    # ------------------------------------------------------------------ execution hook
    def prepare_model(self, model: Any, context: RunContext) -> Any:
        """Place ``model`` for this technique; default ``model.to(context.device)``."""
        return model.to(context.device)

    def check_local(self, device: str) -> None:
        """Raise :class:`TechniqueUnavailableError` when this technique cannot run
        in-process on ``device`` (default: any device is fine)."""
        return None

    def run(
        self, train: Callable[[RunContext], T], gpus: int = 1, *, device: str | None = None
    ) -> RunResult[T]:
        """Execute ``train(context)`` under this technique on the local machine and time it.

        For now this runs **in this process on one device**: ``device`` (default
        ``"cuda:0"`` when a CUDA device is visible, else ``"cpu"``).  The callable builds
        its model, calls ``context.prepare(model)`` and trains; its return value comes back
        in :class:`RunResult` with the wall time in seconds.  Multi-GPU runs (``gpus > 1``)
        need one process per GPU, which is the executor's job: they raise
        :class:`TechniqueUnavailableError`, saying whether GPUs are missing.
        torch is imported only here, lazily, to count CUDA devices.
        """
        if gpus < self.min_gpus or (self.max_gpus is not None and gpus > self.max_gpus):
            upper = "" if self.max_gpus is None else f" and at most {self.max_gpus}"
            raise InputError(
                f"technique {self.name!r} runs on at least {self.min_gpus}{upper} GPU(s), "
                f"asked for {gpus}"
            )
        if gpus > 1:
            found = local_cuda_devices()
            if found < gpus:
                raise TechniqueUnavailableError(
                    f"technique {self.name!r} on {gpus} GPUs needs {gpus} CUDA devices; this "
                    f"machine has {found}. Run a one-device technique ('single', 'spilling') "
                    "with gpus=1 on CPU instead."
                )
            raise TechniqueUnavailableError(
                f"technique {self.name!r} on {gpus} GPUs needs one process per GPU; "
                "in-process run() covers one device only (multi-process launch belongs to "
                "the executor)."
            )
        chosen = device or ("cuda:0" if local_cuda_devices() > 0 else "cpu")
        self.check_local(chosen)
        context = RunContext(technique=self, gpus=1, device=chosen)
        log.info("running %s on %s", self.name, chosen)
        started = time.perf_counter()
        value = train(context)
        wall = time.perf_counter() - started
        log.info("%s on %s finished in %.3f s", self.name, chosen, wall)
        return RunResult(value=value, wall_s=wall, technique=self.name, gpus=1, device=chosen)


def _allreduce_bytes(parameters: float, gpus: int) -> float:
    """Ring all-reduce of fp16 gradients, bytes sent per GPU: 2 (g-1)/g x 2P."""
    return 2.0 * (gpus - 1) / gpus * HALF_BYTES * parameters


class Single(ParallelismTechnique):
    """One GPU, no parallelism.

    memory = 16 P + activations(b);  step = B c P s / F.
    """

    name = "single"
    description = "one GPU, the whole model and optimizer on it"
    max_gpus = 1

    def memory_per_gpu_bytes(self, job: JobSpec, gpus: int) -> float:
        return job.state_bytes + job.activation_bytes(job.micro_batch_size)

    def step_time(self, job: JobSpec, gpus: int, gpu: GpuSpec) -> StepTime:
        return StepTime(job.batch_size * job.flops_per_sample / gpu.flops_per_s)


class DataParallel(ParallelismTechnique):
    """DDP: a full replica per GPU, gradients all-reduced once per step.

    Each GPU owns n = ceil(B / g) samples per step, in micro-batches of b' = min(b, n).
    memory = 16 P + activations(b')  (constant in g while B >= g b);
    step = n c P s / F + 2 (g-1)/g x 2P / W  (ring all-reduce of fp16 gradients).
    """

    name = "ddp"
    description = "distributed data parallel: full replica per GPU, all-reduce of gradients"
    min_gpus = 2

    def memory_per_gpu_bytes(self, job: JobSpec, gpus: int) -> float:
        per_gpu = math.ceil(job.batch_size / gpus)
        return job.state_bytes + job.activation_bytes(min(job.micro_batch_size, per_gpu))

    def step_time(self, job: JobSpec, gpus: int, gpu: GpuSpec) -> StepTime:
        per_gpu = math.ceil(job.batch_size / gpus)
        compute = per_gpu * job.flops_per_sample / gpu.flops_per_s
        comm = _allreduce_bytes(job.model.parameters, gpus) / (gpu.interconnect_gb_s * GB)
        return StepTime(compute, comm)


class FullySharded(ParallelismTechnique):
    """FSDP / ZeRO-3: parameters, gradients and optimizer states sharded over g GPUs.

    memory = 16 P / g + 3 x 2 P / L (the gathered layer, the prefetched one and its
    gradient) + activations(b');
    per micro-batch: all-gather (forward) + all-gather (backward) + reduce-scatter, each
    (g-1)/g x 2P bytes = 1.5 x DDP's all-reduce; k = ceil(n / b') micro-batches per step.
    step = n c P s / F + k x 3 (g-1)/g x 2P / W.
    """

    name = "fsdp"
    description = "fully sharded data parallel (ZeRO-3): states sharded, layers gathered"
    min_gpus = 2

    def memory_per_gpu_bytes(self, job: JobSpec, gpus: int) -> float:
        per_gpu = math.ceil(job.batch_size / gpus)
        gathered = 3.0 * HALF_BYTES * job.layer_parameters
        return (job.state_bytes / gpus + gathered
                + job.activation_bytes(min(job.micro_batch_size, per_gpu)))

    def step_time(self, job: JobSpec, gpus: int, gpu: GpuSpec) -> StepTime:
        per_gpu = math.ceil(job.batch_size / gpus)
        micro_batches = math.ceil(per_gpu / min(job.micro_batch_size, per_gpu))
        compute = per_gpu * job.flops_per_sample / gpu.flops_per_s
        collective = 3.0 * (gpus - 1) / gpus * HALF_BYTES * job.model.parameters
        comm = micro_batches * collective / (gpu.interconnect_gb_s * GB)
        return StepTime(compute, comm)


class Pipeline(ParallelismTechnique):
    """GPipe: layers split into g stages of l = ceil(L / g) layers; m = ceil(B / b)
    micro-batches per step flow through them.

    memory = 16 P l / L + m x stored activations of l layers (GPipe keeps every
    micro-batch's until its backward) + one micro-batch's working activations;
    step = (m + g - 1) x (l / L) b c P s / F  +  (m + g - 1) x 2 x 2 b s h / W
    (the bubble is (g-1)/(m+g-1) of the schedule; the second term sends activations
    forward and their gradients back between neighbouring stages).  At most L stages.
    """

    name = "pipeline"
    description = "GPipe pipeline parallelism: layers split into stages, micro-batches"
    min_gpus = 2

    def applicable(self, job: JobSpec, gpus: int) -> bool:
        return super().applicable(job, gpus) and gpus <= job.model.layers

    def memory_per_gpu_bytes(self, job: JobSpec, gpus: int) -> float:
        layers = math.ceil(job.model.layers / gpus)
        b = job.micro_batch_size
        micro_batches = math.ceil(job.batch_size / b)
        states = job.state_bytes * layers / job.model.layers
        return (states + micro_batches * job.stored_activation_bytes(b, layers)
                + job.working_activation_bytes(b))

    def step_time(self, job: JobSpec, gpus: int, gpu: GpuSpec) -> StepTime:
        layers = math.ceil(job.model.layers / gpus)
        b = job.micro_batch_size
        micro_batches = math.ceil(job.batch_size / b)
        slots = micro_batches + gpus - 1
        stage_s = layers / job.model.layers * b * job.flops_per_sample / gpu.flops_per_s
        m = job.model
        boundary = 2.0 * HALF_BYTES * b * m.sequence_length * m.hidden_size
        return StepTime(
            compute_s=slots * stage_s,
            communication_s=slots * boundary / (gpu.interconnect_gb_s * GB),
            bubble_fraction=(gpus - 1) / slots,
        )


class Spilling(ParallelismTechnique):
    """Model spilling (Hydra-style offload): model states live in host memory, layers are
    streamed to the GPU one at a time (double-buffered), so any model fits the GPU.

    On g GPUs, each GPU streams from the node's one host copy and owns n = ceil(B / g)
    samples per step, in k = ceil(n / b') micro-batches.
    GPU memory = 2 layers x (2 + 2) bytes x P / L + activations(b');
    host memory = 16 P (one copy per job);
    step = n c P s / F + k x 3 x 2P / W_pcie (per micro-batch the fp16 weights go down for
    the forward and again for the backward, the fp16 gradients come up).
    """

    name = "spilling"
    description = "model spilling: states in host memory, layers streamed over PCIe"

    def memory_per_gpu_bytes(self, job: JobSpec, gpus: int) -> float:
        per_gpu = math.ceil(job.batch_size / gpus)
        buffers = 2.0 * 2.0 * HALF_BYTES * job.layer_parameters
        return buffers + job.activation_bytes(min(job.micro_batch_size, per_gpu))

    def host_memory_bytes(self, job: JobSpec, gpus: int) -> float:
        return job.state_bytes

    def step_time(self, job: JobSpec, gpus: int, gpu: GpuSpec) -> StepTime:
        per_gpu = math.ceil(job.batch_size / gpus)
        micro_batches = math.ceil(per_gpu / min(job.micro_batch_size, per_gpu))
        compute = per_gpu * job.flops_per_sample / gpu.flops_per_s
        transfer = micro_batches * 3.0 * HALF_BYTES * job.model.parameters / (gpu.pcie_gb_s * GB)
        return StepTime(compute, transfer)

    def check_local(self, device: str) -> None:
        """In-process spilling is plain execution on CPU (host memory is the device's);
        on a GPU the layer streaming belongs to the executor."""
        if device != "cpu":
            raise TechniqueUnavailableError(
                "in-process run() of 'spilling' supports device='cpu' only (layer streaming "
                "to a GPU belongs to the executor)"
            )


# ----------------------------------------------------------------------------- registry

#: Techniques by name.  Add one with :func:`register_technique`.
TECHNIQUES: dict[str, ParallelismTechnique] = {}

TechniqueT = TypeVar("TechniqueT", bound=ParallelismTechnique)


def register_technique(
    technique: type[TechniqueT] | TechniqueT, *, replace: bool = False
) -> type[TechniqueT] | TechniqueT:
    """Register a technique class (instantiated with no arguments) or instance by its
    ``name``; returns its argument, so it works as a class decorator.

    Raises InputError when the name is taken (unless ``replace``) or missing.
    """
    instance = technique() if isinstance(technique, type) else technique
    name = getattr(instance, "name", None)
    if not isinstance(name, str) or not name:
        raise InputError(f"technique {technique!r} has no 'name'")
    if name in TECHNIQUES and not replace:
        raise InputError(f"technique {name!r} is already registered (pass replace=True)")
    TECHNIQUES[name] = instance
    return technique


def get_technique(name: str | ParallelismTechnique) -> ParallelismTechnique:
    """The registered technique ``name`` (an instance passes through)."""
    if isinstance(name, ParallelismTechnique):
        return name
    try:
        return TECHNIQUES[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown parallelism technique {name!r} (known: {sorted(TECHNIQUES)})"
        ) from None


for _cls in (Single, DataParallel, FullySharded, Pipeline, Spilling):
    register_technique(_cls)


# ----------------------------------------------------------------------------- configs


def estimate_all(
    job: JobSpec,
    gpu: str | GpuSpec,
    gpu_counts: Iterable[int] = DEFAULT_GPU_COUNTS,
    techniques: Sequence[str | ParallelismTechnique] | None = None,
) -> list[Estimate]:
    """Every applicable (technique, GPU count) estimate, feasible or not, in technique
    order then GPU order.  ``techniques`` None means every registered technique."""
    spec = get_gpu(gpu)
    chosen = [get_technique(t) for t in (techniques if techniques is not None else TECHNIQUES)]
    counts = sorted(set(gpu_counts))
    out: list[Estimate] = []
    for technique in chosen:
        for g in counts:
            estimate = technique.estimate(job, g, spec)
            if estimate is not None:
                out.append(estimate)
    return out


def estimate_configs(
    job: JobSpec,
    gpu: str | GpuSpec,
    gpu_counts: Iterable[int] = DEFAULT_GPU_COUNTS,
    techniques: Sequence[str | ParallelismTechnique] | None = None,
    *,
    digits: int | None = 1,
) -> list[SaturnConfig]:
    """The ``Job.configs`` list for ``job`` on ``gpu``: one :class:`SaturnConfig` per
    applicable (technique, GPU count), sorted by GPUs then technique.

    Configurations that do not fit are kept with ``feasible=False``, their ``memory_gb``
    and the runtime the cost model predicts (>= 0, as the schema requires; formulations
    skip infeasible entries).  Runtimes (s) and memory (GB) are rounded to ``digits``.
    """
    estimates = estimate_all(job, gpu, gpu_counts, techniques)
    for e in estimates:
        if not e.feasible:
            log.debug("%s %s on %d GPUs infeasible: %s", job.model.name, e.technique, e.gpus,
                      e.reason)
    configs = [e.to_config(digits=digits) for e in estimates]
    return sorted(configs, key=lambda c: (c.gpus, c.technique))
