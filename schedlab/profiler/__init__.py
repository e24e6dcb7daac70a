"""Profiling: how long a job takes, and how much memory it needs, per parallelism technique.

- :mod:`schedlab.world.parallelism` (re-exported here): Saturn's technique template
  (:class:`ParallelismTechnique` with ``estimate`` and ``run``), the built-in techniques
  (``single``, ``ddp``, ``fsdp``, ``pipeline``, ``spilling``) with an analytic cost model, and
  :func:`estimate_configs`, which fills an instance's ``Job.configs``.  It lives in the world
  layer (docs/architecture.md) because the Saturn workload generator reads it too.

torch is optional: nothing here imports it at module import time.  See docs/parallelism.md.
"""

from schedlab.world.parallelism import (
    ADAM_MIXED_PRECISION_BYTES,
    DEFAULT_GPU_COUNTS,
    GB,
    GPUS,
    MODELS,
    TECHNIQUES,
    DataParallel,
    Estimate,
    FullySharded,
    GpuSpec,
    JobSpec,
    ModelSpec,
    ParallelismTechnique,
    Pipeline,
    RunContext,
    RunResult,
    Single,
    Spilling,
    StepTime,
    TechniqueUnavailableError,
    estimate_all,
    estimate_configs,
    get_gpu,
    get_model,
    get_technique,
    local_cuda_devices,
    register_technique,
)

__all__ = [
    "ADAM_MIXED_PRECISION_BYTES",
    "DEFAULT_GPU_COUNTS",
    "GB",
    "GPUS",
    "MODELS",
    "TECHNIQUES",
    "DataParallel",
    "Estimate",
    "FullySharded",
    "GpuSpec",
    "JobSpec",
    "ModelSpec",
    "ParallelismTechnique",
    "Pipeline",
    "RunContext",
    "RunResult",
    "Single",
    "Spilling",
    "StepTime",
    "TechniqueUnavailableError",
    "estimate_all",
    "estimate_configs",
    "get_gpu",
    "get_model",
    "get_technique",
    "local_cuda_devices",
    "register_technique",
]
