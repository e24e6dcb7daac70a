r"""One job's state under Shockwave's simulator's batch-size rule, and the rule's decisions.

:class:`ShockwaveSteps` is what ``JobState.shockwave_steps`` carries for a job of a Shockwave
trace that the simulator counts in steps (``simulate(shockwave_steps=...)``): its model, batch
sizes, steps/s per batch size and type, and the request it has pending.  Its methods are the
rule's pure parts: which request a job makes at a round boundary
(:meth:`~ShockwaveSteps.decide`), which batch size a switch picks
(:meth:`~ShockwaveSteps.new_batch_size`) and how total and run steps are rescaled
(:meth:`~ShockwaveSteps.rescale`); :func:`from_profile` builds it from an instance's job.

The rule as a whole, with its sources in Shockwave's code, and the part the simulator applies
as it runs (when a switch happens, the deadline, failed runs) are
:mod:`schedlab.simulator.shockwave_steps`.  This half sits with the policies' state because
:class:`~schedlab.policies.state.JobState` carries it, and the simulator sits above the
policies (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from schedlab.workloads.shockwave_adaptation import (
    ACCORDION_MAX_BATCH_SIZE,
    DATASET_SAMPLES,
    MAX_BATCH_SIZE,
    gns_schedule,
)

Request = Literal["grow", "shrink"] | None

#: GNS patterns are drawn over at least this many epochs (``max(760, current_epoch + 2)``).
GNS_PATTERN_EPOCHS = 760
#: Accordion never shrinks below these batch sizes (the list in ``_simulate_accordion``).
ACCORDION_MIN_BATCH_SIZE: Mapping[str, int] = {
    "ResNet-18": 16, "ResNet-50": 16, "Transformer": 16, "LM": 5, "Recommendation": 512,
}


def simulator_critical(model: str, initial_batch_size: int, epoch: int) -> bool:
    """Whether ``epoch`` (as :func:`epoch_of` counts) is in Accordion's critical regime in
    Shockwave's simulator (``_simulate_accordion``, scheduler.py:1673-1695):

    * ResNet-18: e < 20 if b0 = 256 else 10, or 150 <= e < 160, or 250 <= e < 260;
    * ResNet-50: e mod 30 < 10;  LM: e < 10;
    * Recommendation: e < 30 (b0 512, 1024), 40 (2048), 10 (4096, 8192).
    """
    if model == "ResNet-18":
        head = 20 if initial_batch_size == 256 else 10
        return epoch < head or 150 <= epoch < 160 or 250 <= epoch < 260
    if model == "ResNet-50":
        return epoch % 30 < 10
    if model == "LM":
        return epoch < 10
    if model == "Recommendation":
        head = {512: 30, 1024: 30, 2048: 40, 4096: 10, 8192: 10}[initial_batch_size]
        return epoch < head
    return True


def steps_per_epoch(model: str, batch_size: int) -> int:
    """ceil(N / b) steps make one epoch at batch size b."""
    return math.ceil(DATASET_SAMPLES[model] / batch_size)


def epoch_of(model: str, batch_size: int, steps: float) -> int:
    """e = ceil(S / ceil(N / b)): the epochs *started* after S steps at batch size b."""
    return math.ceil(steps / steps_per_epoch(model, batch_size))


@dataclass(slots=True)
class ShockwaveSteps:
    """One job's state under Shockwave's simulator's rule (module docstring).

    ``steps_per_s[b][k]``: steps/s of the job's gang on type k at batch size b.
    ``profile_s``: the profile's duration (its epochs' seconds on the fastest type), the
    deadline's reference.  ``useful_s``, ``failed_runs`` and ``request`` change as it runs.
    """

    model: str
    adaptation: Literal["static", "accordion", "gns"]
    initial_batch_size: int
    scale_factor: int
    total_steps: float  # steps at b0 (the trace's)
    steps_per_s: dict[int, dict[str, float]]
    profile_s: float
    batch_size: int = 0
    request: Request = None
    useful_s: float = 0.0
    failed_runs: int = 0

    def __post_init__(self) -> None:
        if not self.batch_size:
            self.batch_size = self.initial_batch_size

    def copy(self) -> ShockwaveSteps:
        """A fresh copy (each run mutates its own)."""
        return replace(self, steps_per_s={b: dict(v) for b, v in self.steps_per_s.items()})

    def decide(self, steps_run: float) -> Request:
        """The request made at a round boundary after ``steps_run`` steps at the current
        batch size (``_simulate_gns`` / ``_simulate_accordion``)."""
        model, b, b0 = self.model, self.batch_size, self.initial_batch_size
        if self.adaptation == "static":  # neither simulate_* runs (its mode is neither)
            return None
        e = epoch_of(model, b, steps_run)
        if self.adaptation == "gns":
            pattern = gns_schedule(model, b0, self.scale_factor, max(GNS_PATTERN_EPOCHS, e + 2))
            if (pattern[e + 1] > b or pattern[e] > b) and b != MAX_BATCH_SIZE[model]:
                return "grow"
            return None
        if model not in ACCORDION_MAX_BATCH_SIZE:  # the Transformer: Accordion returns early
            return None
        critical = simulator_critical(model, b0, e)
        if b == b0 and not critical and b != MAX_BATCH_SIZE[model]:
            return "grow"
        if b != b0 and critical and b != ACCORDION_MIN_BATCH_SIZE[model]:
            return "shrink"
        return None

    def new_batch_size(self) -> int | None:
        """The batch size the pending request switches to, None when it is rejected
        (``_scale_bs_and_iters``: b0 already Accordion's largest, or no throughput known)."""
        model, b0 = self.model, self.initial_batch_size
        if self.request is None or b0 == ACCORDION_MAX_BATCH_SIZE.get(model):
            return None
        if self.adaptation == "gns":
            new = 2 * self.batch_size
        elif self.request == "grow":
            new = ACCORDION_MAX_BATCH_SIZE[model]
        else:
            new = b0
        return new if new in self.steps_per_s else None

    def rescale(self, total_steps: float, steps_run: float, new: int) -> tuple[float, float]:
        """(T', S'): total and run steps after switching from the current batch size to
        ``new`` (module docstring; epochs are kept, a started epoch counts as done)."""
        model, old = self.model, self.batch_size
        spe_old, spe_new = steps_per_epoch(model, old), steps_per_epoch(model, new)
        old_epochs = math.ceil(total_steps / spe_old)
        new_total = math.ceil(total_steps * (1 / (new / old)))
        if math.ceil(new_total / spe_new) != old_epochs:
            new_total = spe_new * old_epochs
        new_run = math.ceil(steps_run / spe_old) * spe_new
        return float(new_total), float(new_run)


def model_of(job_type: str | None) -> str | None:
    """The model family of a Shockwave job type ("LM (batch size 10)" -> "LM"; the text
    before the first space, as ``_get_num_epochs`` reads it), None when unknown."""
    if not job_type:
        return None
    model = job_type.split(" ", 1)[0]
    return model if model in DATASET_SAMPLES else None


def from_profile(model: str, adaptation: Literal["static", "accordion", "gns"],
                 scale_factor: int,
                 total_steps: float, initial_throughput: Mapping[str, float],
                 regimes: Mapping[int, float], batch_schedule: Sequence[int]) -> ShockwaveSteps:
    """The rule's state of a job from its instance entry: ``total_steps`` and
    ``initial_throughput`` (steps/s per type) at b0 = batch_schedule[0]; at another batch size
    b the steps/s on type k are N / (b x regimes[b]) x T[k] / max_k' T[k'] (``regimes`` being
    N / b / T_b seconds per epoch on the fastest type); ``profile_s`` = the schedule's
    seconds there."""
    samples = DATASET_SAMPLES[model]
    fastest = max(initial_throughput.values())
    b0 = int(batch_schedule[0])
    steps_per_s = {int(b): {k: samples / (int(b) * t) * v / fastest
                            for k, v in initial_throughput.items()}
                   for b, t in regimes.items()}
    steps_per_s[b0] = dict(initial_throughput)
    return ShockwaveSteps(model=model, adaptation=adaptation, initial_batch_size=b0,
                          scale_factor=int(scale_factor), total_steps=float(total_steps),
                          steps_per_s=steps_per_s,
                          profile_s=math.fsum(regimes[b] for b in batch_schedule))
