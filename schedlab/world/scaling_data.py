"""Published multi-GPU scaling figures for GPT-class models, with their sources.

These numbers were chosen (and committed) *before* any Saturn table was run with them, and
were not tuned towards any result; ``docs/saturn-calibration.md`` says how each was chosen,
what it measures and where nothing usable was found.

Each :class:`PublishedScaling` holds the speed-up S(g) = throughput on g GPUs / throughput
on one GPU of one technique, at the GPU counts the source reports (S(1) = 1 by definition).
Efficiency is e(g) = S(g) / g.

What is here:

* ``pipeline`` (GPipe): Huang et al., "GPipe: Efficient Training of Giant Neural Networks
  using Pipeline Parallelism", NeurIPS 2019 (arXiv:1811.06965), **Table 2**, row
  Transformer-48 (48 transformer layers, Cloud TPU v3), M = 32 micro-batches: normalized
  training throughput 1.8 (K = 2 partitions), 3.4 (K = 4), 6.3 (K = 8).  The table normalizes
  to K = 2, M = 1, where only one partition computes at a time (no pipelining), so that
  baseline is taken as one device's throughput: S(2) = 1.8, S(4) = 3.4, S(8) = 6.3.  This is
  the only published pipeline curve of a transformer at 2/4/8 devices we found; it is on TPUs
  with a fast interconnect.  (The same paper's Table 3, P100 GPUs without NVLink, M = 32,
  gives Transformer K = 8 vs K = 2 = 3.3x; it has no one-device baseline and our GPUs have
  NVLink, so it is recorded in the doc only.)

* ``tensor`` (recorded, not mapped to a technique of ours): NVIDIA ADLR, "MegatronLM's
  Supercharged V1.0" (nv-adlr.github.io/MegatronLMV1), **Table 1** "Weak model parallel
  scaling": GPT-2 configurations 1.2B / 2.0B / 4.2B / 8.7B on 1 / 2 / 4 / 8 V100 GPUs of one
  DGX-2H, batch 8, iteration times 1288 / 1242 / 1357 / 1508 ms, weak-scaling efficiency
  100% / 90.7% / 86.5% / 79.6%.  This is intra-layer (tensor) model parallelism with the model
  growing with g, not a technique in our template, so the calibrated estimator does not use it.

Not found (the calibrated estimator keeps the analytic model there): a published throughput
vs GPU count on one node, 1 to 8 GPUs, of a GPT-2/GPT-J-class model for PyTorch DDP, for
FSDP / ZeRO-3, and for model spilling.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishedScaling:
    """Speed-ups of one technique at published GPU counts.

    Attributes:
        technique: our technique name ("pipeline") or a label for a recorded-only figure.
        speedups: ((g, S(g)), ...) in increasing g, S dimensionless (throughput ratio to one
            GPU); g = 1 with S = 1 is implied and not listed.
        source: paper or document, table or figure, row and setting.
        note: how the published numbers were turned into S(g).
        used: whether the calibrated estimator applies it to ``technique``.
    """

    technique: str
    speedups: tuple[tuple[int, float], ...]
    source: str
    note: str = ""
    used: bool = True


#: GPipe (Huang et al., NeurIPS 2019, arXiv:1811.06965) Table 2, Transformer-48 on Cloud TPU
#: v3, M = 32 micro-batches; normalized to K = 2, M = 1 (one partition busy at a time),
#: taken as one device: S(2) = 1.8, S(4) = 3.4, S(8) = 6.3.
GPIPE_TRANSFORMER_48 = PublishedScaling(
    technique="pipeline",
    speedups=((2, 1.8), (4, 3.4), (8, 6.3)),
    source=("Huang et al., GPipe, NeurIPS 2019 (arXiv:1811.06965), Table 2, Transformer-48 "
            "on Cloud TPU v3, M = 32 micro-batches, K = 2/4/8 partitions"),
    note=("normalized throughput 1.8 / 3.4 / 6.3 against K = 2, M = 1 (no pipelining: one "
          "partition computes at a time), taken as one device's throughput"),
)

#: NVIDIA ADLR, "MegatronLM's Supercharged V1.0", Table 1 (weak model-parallel scaling, GPT-2
#: 1.2B/2.0B/4.2B/8.7B on 1/2/4/8 V100 of a DGX-2H, batch 8): efficiency 100/90.7/86.5/79.6%,
#: i.e. S(g) = g x efficiency.  Recorded only: tensor parallelism is not one of our techniques.
MEGATRON_V1_TENSOR_WEAK = PublishedScaling(
    technique="tensor",
    speedups=((2, 2 * 0.907), (4, 4 * 0.865), (8, 8 * 0.796)),
    source=("NVIDIA ADLR, MegatronLM's Supercharged V1.0 (nv-adlr.github.io/MegatronLMV1), "
            "Table 1, weak model-parallel scaling, GPT-2 1.2B-8.7B on 1-8 V100 (DGX-2H)"),
    note="weak scaling (the model grows with g): S(g) = g x published efficiency",
    used=False,
)

#: Every recorded figure.
PUBLISHED_FIGURES: tuple[PublishedScaling, ...] = (GPIPE_TRANSFORMER_48, MEGATRON_V1_TENSOR_WEAK)

#: Techniques of ours without a usable published figure (analytic model kept).
NOT_FOUND: dict[str, str] = {
    "ddp": "no published 1-8 GPU throughput curve of a GPT-2/GPT-J-class model under DDP found",
    "fsdp": "no published 1-8 GPU throughput curve of a GPT-2/GPT-J-class model under "
            "FSDP/ZeRO-3 found",
    "spilling": "no published multi-GPU curve for model spilling found",
    "single": "one GPU: nothing to scale",
}
