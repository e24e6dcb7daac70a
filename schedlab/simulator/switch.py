r"""The context-switch model of Titan's world: what a task pays each time it is (re)allocated.

Titan (SoCC'22) fine-tunes foundation models whose parameters take seconds to load, so every
reallocation -- a first start, a resume after waiting, a change of GPU count -- costs
(docs/simulator.md, "Elastic mode"):

.. math::

    o(m, g, \text{pipelined}) = c + \ell(m, g, \text{pipelined})

with c the **checkpoint** time (save the task's state before it moves; default
:data:`DEFAULT_CHECKPOINT_S` = 30 s, the ``add_ckpt`` of Titan's public simulator,
``run/exp_cluster/fast_batch_run.sh``) and \ell the exposed **parameter load** of base model m
on g GPUs:

* **non-pipelined**: the whole load, \ell = L_m(g), before any computation starts;
* **pipelined** (Titan's pipelined switch): the n_m layers are transferred one after another
  while the layers already loaded compute, in reversed load order, so the computation chases
  the transfer.  With per-layer transfer \lambda = L_m(g) / n_m and per-layer computation
  \kappa, the transfer and the computation form a two-stage pipeline over n_m layers whose
  exposed time (its makespan minus the n_m \kappa the computation takes anyway) is

  .. math::

      \ell_{\text{pipe}} = \lambda + (n_m - 1)\,\max(0, \lambda - \kappa),

  so when each layer's computation covers the next layer's transfer (\kappa >= \lambda) only
  the first layer's load shows, \ell_pipe = L_m(g) / n_m; with no computation to overlap
  (\kappa = 0) it is the whole load again.

**Defaults** (:data:`BASE_MODELS`).  L_m is the context-switch time Titan's authors measured on
V100 GPUs and ship with their public code (``client/application/appinfo/fminfo/V100/
<model>_context_switch.csv``, column ``time_cost``; the simulator there reads the largest
value of the file): ViT-B 4.16 s, ViT-L 14.14 s, RoBERTa-base 30.40 s, RoBERTa-large 19.35 s.
That code charges the same value at every GPU count (``get_context_switch_overhead`` ignores
the placement), and so do the defaults here: one (non-pipelined, pipelined) pair per model,
repeated for every GPU count of :data:`DEFAULT_GPU_COUNTS`.  n_m is the number of Transformer
encoder layers (12 for the base models, 24 for the large ones).  The defaults take
\kappa >= \lambda (the regime the pipelined switch is designed for), so the pipelined load is
L_m / n_m: ViT-B 0.35 s, ViT-L 0.59 s, RoBERTa-base 2.53 s, RoBERTa-large 0.81 s.
:meth:`SwitchModel.from_table` takes measured pairs per (model, GPU count) instead (the
profiler's, when it measures them).

**Measured costs** (:func:`titan_switch_from_profile`).  A throughput file's switch cells
(:mod:`schedlab.profiler.switching`, docs/switch-costs.md) give, per zoo job, the measured
seconds of a ``cold`` switch (new process, build, load, first step) and of a ``pipelined``
one (stage-by-stage load overlapped with the first step); mapping each base model to a zoo
job makes those the table's (non-pipelined, pipelined) pair at every GPU count.  They include
the first step, which the model above does not charge; c stays a parameter.

Titan's public code at HEAD never uses a pipelined switch: ``FoundationModelJob.reallocate``
sets ``pipeline = False`` before it looks the overhead up.  The pipelined numbers here are
this model's, not measurements.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from schedlab.errors import InputError

if TYPE_CHECKING:
    from schedlab.profiler.matrix import ThroughputFile

#: Checkpoint time charged at every reallocation, s (Titan's simulator: ``--add_ckpt=30``).
DEFAULT_CHECKPOINT_S = 30.0
#: GPU counts the default table lists (Titan's round options up to 32 GPUs: 1, 2, 3 and whole
#: nodes of 4).
DEFAULT_GPU_COUNTS: tuple[int, ...] = (1, 2, 3, 4, 8, 12, 16, 20, 24, 28, 32)


@dataclass(frozen=True)
class BaseModel:
    """A base model's switch parameters: ``layers`` n_m (Transformer encoder layers) and
    ``load_s`` L_m (seconds to load its parameters, non-pipelined), with where the number
    comes from."""

    layers: int
    load_s: float
    source: str


#: The base models of Titan's workloads (the names of schedlab.workloads.titan).  ``load_s``:
#: Titan's measured V100 context-switch times (module docstring).
BASE_MODELS: Mapping[str, BaseModel] = {
    "vit-base": BaseModel(12, 4.16124963760376,
                          "TitanSched fminfo/V100/vit_context_switch.csv (food101)"),
    "vit-large": BaseModel(24, 14.137871026992798,
                           "TitanSched fminfo/V100/vit-large_context_switch.csv (food101)"),
    "roberta-base": BaseModel(12, 30.399009466171265,
                              "TitanSched fminfo/V100/roberta-base_context_switch.csv (qnli)"),
    "roberta-large": BaseModel(24, 19.345592975616455,
                               "TitanSched fminfo/V100/roberta-large_context_switch.csv (qnli)"),
}


def pipelined_load_s(load_s: float, layers: int, compute_per_layer_s: float = math.inf) -> float:
    """\\ell_pipe = lambda + (n - 1) max(0, lambda - kappa), lambda = load_s / n (module
    docstring); ``compute_per_layer_s`` is kappa (default: enough to hide every transfer)."""
    if layers < 1:
        raise ValueError(f"a model has at least one layer, got {layers}")
    if load_s < 0 or compute_per_layer_s < 0:
        raise ValueError("load and compute times must be >= 0")
    per_layer = load_s / layers
    return per_layer + (layers - 1) * max(0.0, per_layer - compute_per_layer_s)


@dataclass(frozen=True)
class SwitchCost:
    """Exposed parameter load of one (model, GPU count), s: without and with the pipelined
    switch (``pipelined_s`` <= ``non_pipelined_s``)."""

    non_pipelined_s: float
    pipelined_s: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.non_pipelined_s) and self.non_pipelined_s >= 0
                and math.isfinite(self.pipelined_s) and self.pipelined_s >= 0):
            raise ValueError("switch costs must be finite and >= 0")
        if self.pipelined_s > self.non_pipelined_s:
            raise ValueError(f"a pipelined load ({self.pipelined_s} s) longer than the "
                             f"non-pipelined one ({self.non_pipelined_s} s)")


@dataclass(frozen=True)
class SwitchModel:
    """o(m, g, pipelined) = ``checkpoint_s`` + the table's load for (m, g).

    ``table`` maps (model, GPU count) to a :class:`SwitchCost`.  A count between listed
    counts takes the largest listed count below it (the smallest listed one below the
    smallest); an unknown model is an :class:`~schedlab.errors.InputError`."""

    table: Mapping[tuple[str, int], SwitchCost]
    checkpoint_s: float = DEFAULT_CHECKPOINT_S
    _counts: dict[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.checkpoint_s) and self.checkpoint_s >= 0):
            raise ValueError(f"checkpoint_s must be finite and >= 0, got {self.checkpoint_s}")
        counts: dict[str, list[int]] = {}
        for model, gpus in self.table:
            if gpus < 1:
                raise ValueError(f"{model}: GPU counts start at 1, got {gpus}")
            counts.setdefault(model, []).append(gpus)
        object.__setattr__(self, "_counts", {m: tuple(sorted(c)) for m, c in counts.items()})

    @classmethod
    def defaults(cls, checkpoint_s: float = DEFAULT_CHECKPOINT_S,
                 gpu_counts: Iterable[int] = DEFAULT_GPU_COUNTS) -> SwitchModel:
        """The documented defaults of :data:`BASE_MODELS` (module docstring)."""
        table = {}
        for name, model in BASE_MODELS.items():
            cost = SwitchCost(model.load_s, pipelined_load_s(model.load_s, model.layers))
            for gpus in gpu_counts:
                table[name, gpus] = cost
        return cls(table, checkpoint_s)

    @classmethod
    def from_table(cls, rows: Iterable[tuple[str, int, float, float]],
                   checkpoint_s: float = DEFAULT_CHECKPOINT_S) -> SwitchModel:
        """A model from (model, GPU count, non-pipelined load s, pipelined load s) rows,
        e.g. measurements."""
        table: dict[tuple[str, int], SwitchCost] = {}
        for model, gpus, plain, piped in rows:
            if (model, gpus) in table:
                raise ValueError(f"({model}, {gpus} GPUs) listed twice")
            table[model, int(gpus)] = SwitchCost(float(plain), float(piped))
        return cls(table, checkpoint_s)

    @property
    def models(self) -> tuple[str, ...]:
        """Models the table knows, sorted."""
        return tuple(sorted(self._counts))

    def cost(self, model: str, gpus: int) -> SwitchCost:
        """The table's load pair for ``model`` on ``gpus`` GPUs (rule of the class)."""
        counts = self._counts.get(model)
        if counts is None:
            raise InputError(f"no context-switch cost for base model {model!r} (known: "
                             f"{', '.join(self.models)})", field="base_model")
        listed = [c for c in counts if c <= gpus]
        return self.table[model, listed[-1] if listed else counts[0]]

    def overhead_s(self, model: str, gpus: int, pipelined: bool) -> float:
        """o(m, g, pipelined) = checkpoint + exposed load, s."""
        pair = self.cost(model, gpus)
        return self.checkpoint_s + (pair.pipelined_s if pipelined else pair.non_pipelined_s)


def titan_switch_from_profile(
    profile: str | Path | ThroughputFile,
    models: Mapping[str, str],
    *,
    device: str = "cpu",
    non_pipelined_kind: str = "cold",
    checkpoint_s: float = DEFAULT_CHECKPOINT_S,
    gpu_counts: Iterable[int] = DEFAULT_GPU_COUNTS,
) -> SwitchModel:
    """A :class:`SwitchModel` whose loads are measured switch times (module docstring).

    ``models`` maps each base model name to the zoo job measured for it (``model/size@batch``);
    ``device`` is the profile's device label.  The non-pipelined load of model m is the
    ``non_pipelined_kind`` switch (``cold``, or ``warm``: a live worker's load) of its job and
    the pipelined load its ``pipelined`` switch, both in seconds, repeated at every GPU count
    of ``gpu_counts``.  A missing cell, or a pipelined time above the non-pipelined one, is an
    :class:`~schedlab.errors.InputError` naming the job."""
    from schedlab.profiler.matrix import ThroughputFile, load_throughputs

    data = profile if isinstance(profile, ThroughputFile) else load_throughputs(profile)
    source = None if isinstance(profile, ThroughputFile) else str(profile)
    if non_pipelined_kind not in ("cold", "warm"):
        raise InputError(f"non_pipelined_kind must be 'cold' or 'warm', got "
                         f"{non_pipelined_kind!r}")
    counts = tuple(gpu_counts)
    rows: list[tuple[str, int, float, float]] = []
    for model, job in models.items():
        measured = {}
        for kind in (non_pipelined_kind, "pipelined"):
            seconds = data.switch_seconds(job, device, kind)
            if seconds is None:
                raise InputError(f"no {kind} switch measured for {job!r} on {device!r} "
                                 f"(base model {model!r})", file=source, field="cells")
            measured[kind] = seconds
        plain, piped = measured[non_pipelined_kind], measured["pipelined"]
        if piped > plain:
            raise InputError(f"{job!r} on {device!r}: the measured pipelined switch "
                             f"({piped:.4g} s) is longer than the {non_pipelined_kind} one "
                             f"({plain:.4g} s)", file=source, field="cells")
        rows.extend((model, gpus, plain, piped) for gpus in counts)
    return SwitchModel.from_table(rows, checkpoint_s)
