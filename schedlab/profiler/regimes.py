"""Shockwave's batch-size regimes: seconds per epoch of a model at each batch size.

For ``model/size`` at batch size ``b`` the mean step time ``t_b`` is measured as a solo cell
(one device, :func:`schedlab.profiler.parallel.measure_group` with technique ``single``), and
an epoch of ``N`` = ``samples_per_epoch`` samples takes

    seconds_per_epoch = ceil(N / b) * t_b

(the last, partial batch counted as a whole step).  The cell keeps ``t_b`` as ``step_s``.
"""

from __future__ import annotations

import math

from schedlab.profiler.matrix import RegimeMeasurement, Settings
from schedlab.profiler.parallel import Infeasible, measure_group
from schedlab.profiler.workers import DEFAULT_TIMEOUT_S, WorkerError
from schedlab.profiler.zoo import JobSpec


def epoch_seconds(samples_per_epoch: int, batch_size: int, step_s: float) -> float:
    """``ceil(samples / batch) * step_s``: seconds per epoch at one step time."""
    return math.ceil(samples_per_epoch / batch_size) * step_s


def measure_regime(model: str, size: str, batch_size: int, samples_per_epoch: int,
                   device: str, backend: str, *, settings: Settings, seed: int = 0,
                   threads: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S,
                   ) -> RegimeMeasurement:
    """The regime cell of ``model/size`` at ``batch_size`` on one ``device``."""
    spec = JobSpec(model, size, batch_size)
    cell = RegimeMeasurement(model=f"{model}/{size}", device=device,
                             backend=backend,  # type: ignore[arg-type]
                             batch_size=batch_size, samples_per_epoch=samples_per_epoch)
    try:
        summary, _ = measure_group(spec, backend, "single", 1, settings=settings, seed=seed,
                                   threads=threads, timeout_s=timeout_s)
    except Infeasible as exc:
        return cell.model_copy(update={"status": "infeasible", "reason": str(exc)})
    except WorkerError as exc:
        return cell.model_copy(update={"status": "error", "reason": str(exc)})
    return cell.model_copy(update={
        "step_s": summary.step_s,
        "seconds_per_epoch": epoch_seconds(samples_per_epoch, batch_size, summary.step_s)})
