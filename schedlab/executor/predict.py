r"""What the simulator predicts for a plan: per-segment progress and per-job JCT.

The replay's prediction follows the round simulator's progress rule
(:mod:`schedlab.simulator.engine`, docs/simulator.md) on the *given* plan instead of a
policy's decisions.  A segment of job j on accelerator k over instance time ``[a, b)`` with
R_j steps left:

.. math::

    o = \begin{cases} \min(o_j, b - a) & \text{the job ran before on other slots}\\
                      0 & \text{first start, or the same slots as last time}\end{cases}
    \qquad
    \text{steps} = \min\bigl(R_j,\ (T_{jk} / X)\,(b - a - o)\bigr)

and the job finishes at :math:`a + o + R_j X / T_{jk}` when that is inside the segment.
:math:`o_j` is the job's ``switch_overhead_s`` (0 when absent), exactly when the engine
charges it: a change of accelerator type or GPU ids since the job last ran (a migration);
a first start and a resume on the same slots are free.  :math:`T_{jk}` is the instance's
throughput (steps per *wall* second, as measured) and :math:`X` the time scale: an instance
second lasts :math:`1/X` wall seconds, so a job advances :math:`T/X` steps per instance
second.  Unlike the engine a round never ends early (the plan fixes every round's start).

The JCT of a job is its finish time minus its arrival, in instance seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from schedlab.executor.plan import Plan, Slot

#: A shortfall below this fraction of a job's work counts as done (as the engine's).
FINISH_TOLERANCE = 1e-9


@dataclass
class Prediction:
    """Per segment: predicted steps and switch overhead (instance s); per job: finish time
    (None: not finished by the end of the plan) and steps."""

    segment_steps: dict[int, float] = field(default_factory=dict)
    segment_overhead_s: dict[int, float] = field(default_factory=dict)
    finish_s: dict[str, float | None] = field(default_factory=dict)
    steps: dict[str, float] = field(default_factory=dict)

    def whole_steps(self, plan: Plan) -> dict[int, int]:
        """Whole steps per segment for the steps-budget mode: each job's cumulative predicted
        steps rounded down, differenced (so rounding never drifts over many segments)."""
        done: dict[str, float] = {}
        out: dict[int, int] = {}
        for segment in plan.segments:
            before = done.get(segment.job, 0.0)
            after = before + self.segment_steps.get(segment.index, 0.0)
            done[segment.job] = after
            out[segment.index] = math.floor(after + 1e-9) - math.floor(before + 1e-9)
        return out


def predict(plan: Plan, time_scale: float = 1.0) -> Prediction:
    """Run the progress rule above over ``plan`` with time scale ``time_scale``."""
    out = Prediction()
    left = {job_id: float(job.work_steps) for job_id, job in plan.jobs.items()}
    last_slots: dict[str, tuple[Slot, ...]] = {}
    for job_id in plan.jobs:
        out.finish_s[job_id] = 0.0 if left[job_id] <= 0 else None
    for segment in sorted(plan.segments, key=lambda s: (s.start_s, s.index)):
        job = plan.jobs[segment.job]
        remaining = left[segment.job]
        if remaining <= 0:
            out.segment_steps[segment.index] = 0.0
            out.segment_overhead_s[segment.index] = 0.0
            continue
        previous = last_slots.get(segment.job)
        overhead = 0.0
        if previous is not None and previous != segment.slots:
            overhead = min(job.switch_overhead_s, segment.length_s)
        last_slots[segment.job] = segment.slots
        rate = job.throughput.get(segment.accelerator, 0.0) / time_scale
        possible = rate * (segment.length_s - overhead)
        if possible >= remaining * (1.0 - FINISH_TOLERANCE) and rate > 0:
            steps = remaining
            out.finish_s[segment.job] = segment.start_s + overhead + remaining / rate
        else:
            steps = possible
        left[segment.job] = remaining - steps
        out.segment_steps[segment.index] = steps
        out.segment_overhead_s[segment.index] = overhead
    for job_id, job in plan.jobs.items():
        out.steps[job_id] = job.work_steps - left[job_id]
    return out
