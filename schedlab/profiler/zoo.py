"""The model zoo: real PyTorch training steps on synthetic data for the seeds' job types.

Every model is written in plain ``torch`` (torchvision's only build for torch 2.13 needs CUDA
libraries, so its ResNets cannot be imported here).  Weights are random, data synthetic, and
nothing is downloaded.  Each model has a *size* knob, so a CPU run takes milliseconds per step
and a GPU run is realistic:

============  =======================================================================
model         what it is (``base`` size = the real model's dimensions)
============  =======================================================================
resnet18      ResNet-18: basic blocks [2, 2, 2, 2], widths 64..512, 224 px images, 1000
              classes (Gavel's ResNet-18 on CIFAR-10 used 32 px and 10 classes)
resnet50      ResNet-50: bottleneck blocks [3, 4, 6, 3], widths 64..512 (x4 out), 224 px
transformer   Transformer encoder-decoder (translation, Gavel's Transformer on WMT16):
              d_model 512, 8 heads, 6 + 6 layers, 1024-token vocabularies, 64 tokens
lstm          LSTM language model (Gavel's LM on Wikitext-2): 2 layers, 650 hidden,
              33 278-word vocabulary, 35 tokens (BPTT length)
recommender   Recommendation autoencoder (Gavel's Recommendation on ML-20M): items ->
              512 -> 256 -> 512 -> items over 20 000 items, masked MSE on observed items
gpt           GPT-style decoder (causal self-attention) for the large-model papers:
              d_model 768, 12 heads, 12 layers, 50 257 vocabulary, 128 tokens
============  =======================================================================

Sizes: ``tiny`` (a few ms per CPU step, for tests), ``small`` (tens of ms on CPU) and ``base``
(the dimensions above, for GPUs).  A job is named ``model/size@batch``, e.g.
``resnet18/tiny@32``; :func:`parse_job_name` reads it.

Determinism.  The synthetic batch of step ``t`` is drawn from a generator seeded with
``(seed, t)``, so it depends only on the job's seed and its step counter, never on how many
processes ran before; together with the model, optimizer and RNG state in a checkpoint
(:mod:`schedlab.profiler.checkpoint`), a job resumed after preemption computes bit-identical
parameters to an uninterrupted run on the same device and thread count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from schedlab.errors import InputError

#: Sizes of every model, smallest first.
SIZES: tuple[str, ...] = ("tiny", "small", "base")

_JOB_NAME = re.compile(r"^(?P<model>[a-z0-9_]+)(?:/(?P<size>[a-z]+))?@(?P<batch>[0-9]+)$")


@dataclass(frozen=True)
class JobSpec:
    """One zoo job: ``model`` at ``size`` with ``batch_size`` samples per step."""

    model: str
    size: str = "tiny"
    batch_size: int = 32

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise InputError(f"unknown zoo model {self.model!r}; known: {', '.join(MODELS)}")
        if self.size not in SIZES:
            raise InputError(f"unknown model size {self.size!r}; known: {', '.join(SIZES)}")
        if isinstance(self.batch_size, bool) or self.batch_size < 1:
            raise InputError(f"batch size must be a positive integer, got {self.batch_size!r}")

    @property
    def name(self) -> str:
        """``model/size@batch``, the job's name in throughput files and instances."""
        return f"{self.model}/{self.size}@{self.batch_size}"


def parse_job_name(name: str) -> JobSpec:
    """``"resnet18/tiny@32"`` -> JobSpec (size defaults to ``tiny`` when left out)."""
    match = _JOB_NAME.match(name.strip())
    if match is None:
        raise InputError(f"bad zoo job name {name!r}: expected MODEL[/SIZE]@BATCH, "
                         "e.g. resnet18/tiny@32")
    return JobSpec(match["model"], match["size"] or "tiny", int(match["batch"]))


# ------------------------------------------------------------------------------ layers


class BasicBlock(nn.Module):
    """ResNet basic block: 3x3 conv - BN - ReLU - 3x3 conv - BN, plus the (projected) input."""

    expansion = 1

    def __init__(self, inputs: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.shortcut = _projection(inputs, width, stride)

    def forward(self, x: Tensor) -> Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """ResNet bottleneck: 1x1 reduce - 3x3 - 1x1 expand (x4), plus the (projected) input."""

    expansion = 4

    def __init__(self, inputs: int, width: int, stride: int) -> None:
        super().__init__()
        out = width * self.expansion
        self.conv1 = nn.Conv2d(inputs, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.shortcut = _projection(inputs, out, stride)

    def forward(self, x: Tensor) -> Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + self.shortcut(x))


def _projection(inputs: int, outputs: int, stride: int) -> nn.Module:
    if stride == 1 and inputs == outputs:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False),
                         nn.BatchNorm2d(outputs))


class ResNet(nn.Sequential):
    """ResNet as a sequence of stages (stem, 4 stages, head), so it can be loaded stage by
    stage (the pipelined switch)."""

    def __init__(self, block: type[BasicBlock] | type[Bottleneck], depths: list[int],
                 width: int, classes: int) -> None:
        stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                             nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        stages: list[nn.Module] = []
        inputs = width
        for index, depth in enumerate(depths):
            stage_width = width * 2 ** index
            blocks: list[nn.Module] = []
            for b in range(depth):
                stride = 2 if index > 0 and b == 0 else 1
                blocks.append(block(inputs, stage_width, stride))
                inputs = stage_width * block.expansion
            stages.append(nn.Sequential(*blocks))
        head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inputs, classes))
        super().__init__(stem, *stages, head)


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer with learned positions and a tied-free output projection."""

    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, length: int) -> None:
        super().__init__()
        self.source_embedding = nn.Embedding(vocab, d_model)
        self.target_embedding = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.zeros(1, length, d_model))
        self.core = nn.Transformer(d_model, heads, layers, layers, 4 * d_model, dropout=0.0,
                                   batch_first=True)
        self.output = nn.Linear(d_model, vocab)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(length),
                             persistent=False)

    def forward(self, source: Tensor, target: Tensor) -> Tensor:
        src = self.source_embedding(source) + self.position
        tgt = self.target_embedding(target) + self.position
        return self.output(self.core(src, tgt, tgt_mask=self.causal))


class LstmLanguageModel(nn.Module):
    """Embedding - multi-layer LSTM - linear decoder over the vocabulary."""

    def __init__(self, vocab: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        hidden, _ = self.lstm(self.embedding(tokens))
        return self.decoder(hidden)


class Autoencoder(nn.Module):
    """Recommendation autoencoder: items -> hidden -> bottleneck -> hidden -> items (SELU)."""

    def __init__(self, items: int, hidden: int, bottleneck: int) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(items, hidden), nn.SELU(),
                                     nn.Linear(hidden, bottleneck), nn.SELU())
        self.decoder = nn.Sequential(nn.Linear(bottleneck, hidden), nn.SELU(),
                                     nn.Linear(hidden, items))

    def forward(self, ratings: Tensor) -> Tensor:
        return self.decoder(self.encoder(ratings))


class GptDecoder(nn.Module):
    """GPT-style decoder: token + position embeddings, pre-norm causal self-attention blocks,
    a final norm and an output projection."""

    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, length: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.zeros(1, length, d_model))
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0,
                                       activation="gelu", batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.output = nn.Linear(d_model, vocab)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(length),
                             persistent=False)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embedding(tokens) + self.position
        for block in self.blocks:
            x = block(x, src_mask=self.causal, is_causal=True)
        return self.output(self.norm(x))


# ------------------------------------------------------------------------------ the zoo


#: model -> size -> dimensions.  ``base`` is the real model (see the module docstring).
DIMENSIONS: dict[str, dict[str, dict[str, int]]] = {
    "resnet18": {"tiny": {"width": 8, "pixels": 32, "classes": 10},
                 "small": {"width": 32, "pixels": 64, "classes": 100},
                 "base": {"width": 64, "pixels": 224, "classes": 1000}},
    "resnet50": {"tiny": {"width": 8, "pixels": 32, "classes": 10},
                 "small": {"width": 32, "pixels": 64, "classes": 100},
                 "base": {"width": 64, "pixels": 224, "classes": 1000}},
    "transformer": {"tiny": {"vocab": 256, "d_model": 32, "heads": 2, "layers": 1, "length": 16},
                    "small": {"vocab": 1024, "d_model": 128, "heads": 4, "layers": 2,
                              "length": 32},
                    "base": {"vocab": 1024, "d_model": 512, "heads": 8, "layers": 6,
                             "length": 64}},
    "lstm": {"tiny": {"vocab": 512, "hidden": 32, "layers": 2, "length": 16},
             "small": {"vocab": 4096, "hidden": 200, "layers": 2, "length": 35},
             "base": {"vocab": 33278, "hidden": 650, "layers": 2, "length": 35}},
    "recommender": {"tiny": {"items": 512, "hidden": 64, "bottleneck": 32},
                    "small": {"items": 4096, "hidden": 256, "bottleneck": 128},
                    "base": {"items": 20000, "hidden": 512, "bottleneck": 256}},
    "gpt": {"tiny": {"vocab": 256, "d_model": 32, "heads": 2, "layers": 2, "length": 16},
            "small": {"vocab": 2048, "d_model": 128, "heads": 4, "layers": 4, "length": 64},
            "base": {"vocab": 50257, "d_model": 768, "heads": 12, "layers": 12, "length": 128}},
}

MODELS: tuple[str, ...] = tuple(DIMENSIONS)


def build_model(spec: JobSpec) -> nn.Module:
    """A freshly initialised model of ``spec`` (uses the global torch RNG for its weights)."""
    d = DIMENSIONS[spec.model][spec.size]
    if spec.model == "resnet18":
        return ResNet(BasicBlock, [2, 2, 2, 2], d["width"], d["classes"])
    if spec.model == "resnet50":
        return ResNet(Bottleneck, [3, 4, 6, 3], d["width"], d["classes"])
    if spec.model == "transformer":
        return Seq2SeqTransformer(d["vocab"], d["d_model"], d["heads"], d["layers"],
                                  d["length"])
    if spec.model == "lstm":
        return LstmLanguageModel(d["vocab"], d["hidden"], d["layers"])
    if spec.model == "recommender":
        return Autoencoder(d["items"], d["hidden"], d["bottleneck"])
    return GptDecoder(d["vocab"], d["d_model"], d["heads"], d["layers"], d["length"])


def _optimizer(spec: JobSpec, model: nn.Module) -> torch.optim.Optimizer:
    """SGD with momentum for the CNNs and the LSTM (as their reference scripts), Adam else."""
    if spec.model in ("resnet18", "resnet50", "lstm"):
        return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return torch.optim.Adam(model.parameters(), lr=1e-4)


Batch = tuple[Tensor, ...]


def synthetic_batch(spec: JobSpec, seed: int, step: int,
                    device: torch.device | str = "cpu") -> Batch:
    """The synthetic batch of step ``step``: a function of (spec, seed, step) only."""
    d = DIMENSIONS[spec.model][spec.size]
    gen = torch.Generator().manual_seed((seed * 1_000_003 + step) % (2 ** 63 - 1))
    b = spec.batch_size
    if spec.model in ("resnet18", "resnet50"):
        images = torch.randn(b, 3, d["pixels"], d["pixels"], generator=gen)
        labels = torch.randint(0, d["classes"], (b,), generator=gen)
        batch: Batch = (images, labels)
    elif spec.model == "transformer":
        length = d["length"]
        batch = tuple(torch.randint(0, d["vocab"], (b, length), generator=gen) for _ in "stl")
    elif spec.model in ("lstm", "gpt"):
        tokens = torch.randint(0, d["vocab"], (b, d["length"] + 1), generator=gen)
        batch = (tokens[:, :-1], tokens[:, 1:])
    else:
        observed = torch.rand(b, d["items"], generator=gen) < 0.05
        ratings = torch.randint(1, 6, (b, d["items"]), generator=gen).float() * observed
        batch = (ratings,)
    return tuple(t.to(device) for t in batch)


def _loss(spec: JobSpec, model: nn.Module, batch: Batch) -> Tensor:
    if spec.model in ("resnet18", "resnet50"):
        images, labels = batch
        return nn.functional.cross_entropy(model(images), labels)
    if spec.model == "transformer":
        source, target, labels = batch
        logits = model(source, target)
        return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
    if spec.model in ("lstm", "gpt"):
        inputs, labels = batch
        logits = model(inputs)
        return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
    (ratings,) = batch
    predicted = model(ratings)
    mask = ratings > 0
    # masked MSE over observed items (the autoencoder's loss), mean over observed entries
    return ((predicted - ratings) ** 2 * mask).sum() / mask.sum().clamp(min=1)


class TrainingJob:
    """A zoo job ready to train: model, optimizer, synthetic data and a step counter.

    ``step()`` runs one optimizer step on batch ``steps_done`` and increments the counter.
    ``state()`` / ``load_state()`` hold everything a bit-identical resume needs: parameters
    and buffers, optimizer state, the step counter and the global torch RNG state.
    """

    def __init__(self, spec: JobSpec, *, seed: int = 0, device: torch.device | str = "cpu",
                 model: nn.Module | None = None) -> None:
        self.spec = spec
        self.seed = seed
        self.device = torch.device(device)
        if model is None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                model = build_model(spec)
        self.model = model.to(self.device)
        self.model.train()
        self.optimizer = _optimizer(spec, self.model)
        self.steps_done = 0

    def step(self) -> float:
        """One training step; returns the loss (a Python float, which syncs the device)."""
        batch = synthetic_batch(self.spec, self.seed, self.steps_done, self.device)
        self.optimizer.zero_grad(set_to_none=True)
        loss = _loss(self.spec, self.model, batch)
        loss.backward()
        self.optimizer.step()
        self.steps_done += 1
        return float(loss.detach())

    def state(self) -> dict[str, Any]:
        """Everything a bit-identical resume needs (tensors, dicts, ints: weights-only safe)."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "steps_done": self.steps_done, "seed": self.seed,
                "rng": torch.get_rng_state()}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` (parameters, optimizer, counter, RNG)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps_done = int(state["steps_done"])
        self.seed = int(state["seed"])
        torch.set_rng_state(state["rng"])

    def parameters_bytes(self) -> int:
        """Bytes of the model's parameters and buffers."""
        tensors = [*self.model.parameters(), *self.model.buffers()]
        return sum(t.numel() * t.element_size() for t in tensors)


def stages(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The model's top-level children in forward order: the units a pipelined switch loads
    one by one (each stage's weights arrive while the previous stages already compute)."""
    return list(model.named_children())


def parameter_count(spec: JobSpec) -> int:
    """Number of parameters of ``spec``'s model (builds it once, on CPU)."""
    with torch.random.fork_rng(devices=[]):
        return sum(p.numel() for p in build_model(spec).parameters())


def describe() -> list[dict[str, Any]]:
    """One row per (model, size): parameters in millions and the dimensions."""
    rows = []
    for model in MODELS:
        for size in SIZES:
            count = parameter_count(JobSpec(model, size, 1))
            rows.append({"model": model, "size": size,
                         "parameters_m": round(count / 1e6, 3 if count < 1e7 else 1),
                         **DIMENSIONS[model][size]})
    return rows

