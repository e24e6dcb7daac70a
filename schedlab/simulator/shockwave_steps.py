r"""Shockwave's simulator's batch-size rule for its jobs (static, Accordion, GNS), in steps.

Shockwave's simulator (``scheduler/scheduler.py`` of github.com/uw-mad-dash/shockwave at
commit 8a44f4a) does not replay a job's batch-size profile (``batch_schedule``).  It runs the
job in whole steps at its *current* batch size b and decides the batch-size changes itself,
from the epochs it has started.  With N the model's samples per epoch
(:data:`~schedlab.workloads.shockwave_adaptation.DATASET_SAMPLES`) and S the steps run:

.. math::

    \text{steps per epoch}(b) = \lceil N / b \rceil, \qquad
    e(S, b) = \lceil S / \lceil N / b \rceil \rceil \quad (\texttt{\_get\_num\_epochs},
    \text{scheduler.py:4723})

**Requests** (made at every round boundary from the progress then, so from the progress the
job had before its next run; ``_simulate_gns`` scheduler.py:1604, ``_simulate_accordion``
scheduler.py:1658):

* GNS: *grow* when g[e] > b or g[e + 1] > b, g being the GNS pattern of (model, b0, scale
  factor) over max(760, e + 2) epochs and b below the model's cap.
* Accordion (not the Transformer): *grow* when b = b0 and epoch e is not critical (and b is
  below the cap); *shrink* when b != b0 and e is critical.  The simulator's critical regimes
  (:data:`SIMULATOR_CRITICAL`) are not the profile's: no 30% warm-up, no Recommendation
  windows, ResNet-50's period without end.

**Switches** (``_scale_bs_and_iters``, scheduler.py:4731, called when the job's next run
completes, after its steps are counted): rejected when b0 is Accordion's largest batch size of
the model (or the new size has no throughput); GNS doubles b, Accordion grows to its largest
size or shrinks to b0.  With b' the new size, total T and run S steps:

.. math::

    E = \lceil T / \lceil N/b \rceil \rceil, \quad
    T' = \lceil T\, b / b' \rceil \text{ if } \lceil T' / \lceil N/b' \rceil \rceil = E
    \text{ else } E \lceil N/b' \rceil, \qquad
    S' = \lceil S / \lceil N/b \rceil \rceil \lceil N/b' \rceil

so epochs are kept and a started epoch counts as done.  The throughput becomes that of b'.

**Deadline** (``_done_callback``, scheduler.py:4375-4396 and 4625): a job whose useful run time
(seconds run less resume overheads) exceeds int(1.5 x its profile's duration) is finished after
that run.

**Failed runs** (``_done_callback`` scheduler.py:4517-4557, ``MAX_FAILED_ATTEMPTS`` = 5,
scheduler.py:53): a switch can leave S' >= T' (a started last epoch counts as done); such a
job is not finished, and each later run makes no progress; the fifth consecutive one removes
it, finished at that run's start plus (T' - S') / throughput s.

**Where the code is.**  A job's state under the rule and the rule's pure decisions (requests,
the new batch size, the rescaled steps: ``ShockwaveSteps``, built by ``from_profile``) are in
:mod:`schedlab.policies.shockwave_steps_state`, next to the ``JobState`` that carries them;
this module applies them to a running job (:func:`count_in_steps`, :func:`after_run`,
:func:`after_failed_run`) and holds the deadline and the failed-run limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schedlab.policies.shockwave_steps_state import ShockwaveSteps, steps_per_epoch

if TYPE_CHECKING:
    from schedlab.policies.state import JobState

#: A job is finished once its useful run time exceeds this factor x its profile duration.
DEADLINE_FACTOR = 1.5
#: Consecutive runs without progress after which a job is removed (``MAX_FAILED_ATTEMPTS``).
MAX_FAILED_RUNS = 5


def count_in_steps(js: JobState) -> None:
    """Turn dynamic job ``js`` (progress in epochs, ``js.shockwave_steps`` set) into a job
    counted in steps at its current batch size, as Shockwave's simulator counts it: total
    = the trace's steps at b0, done = whole epochs done x ceil(N / b0), throughput = steps/s
    at b0; ``batch_schedule`` and ``regimes`` are dropped (``type_speed`` is kept)."""
    rule = js.shockwave_steps
    assert rule is not None
    b0 = rule.initial_batch_size
    done = float(js.epochs_done * steps_per_epoch(rule.model, b0))
    js.total_steps = rule.total_steps
    js.steps_done = min(done, rule.total_steps - 1.0)
    js.throughput = dict(rule.steps_per_s[b0])
    js.batch_schedule = None
    js.regimes = None
    rule.batch_size = b0
    rule.request = rule.decide(js.steps_done)


def after_run(js: JobState, useful_s: float, finished: bool) -> str | None:
    """Apply the rule after ``js`` ran ``useful_s`` seconds (less resume overhead) and
    progressed (``finished``: all its steps are done).  Returns ``"deadline"`` when the
    deadline finishes it, ``"switched"`` when its batch size changed (``total_steps``,
    ``steps_done``, ``throughput`` rescaled), else None."""
    rule = js.shockwave_steps
    assert rule is not None
    rule.useful_s += useful_s
    rule.failed_runs = 0
    if finished:
        return None
    if rule.useful_s > int(rule.profile_s * DEADLINE_FACTOR):
        return "deadline"
    return _switch(js, rule)


def after_failed_run(js: JobState) -> str | None:
    """A run of a job with no steps left (a switch counted its started last epoch as done):
    no progress; returns ``"failed"`` at the :data:`MAX_FAILED_RUNS` th in a row (the job is
    then removed), else what the pending switch did (``"switched"`` or None)."""
    rule = js.shockwave_steps
    assert rule is not None
    rule.failed_runs += 1
    if rule.failed_runs >= MAX_FAILED_RUNS:
        return "failed"
    return _switch(js, rule)


def _switch(js: JobState, rule: ShockwaveSteps) -> str | None:
    """Apply the pending request (if accepted), then make the next one from the new
    progress."""
    new = rule.new_batch_size()
    outcome = None
    if new is not None:
        js.total_steps, js.steps_done = rule.rescale(js.total_steps, js.steps_done, new)
        rule.batch_size = new
        js.throughput = dict(rule.steps_per_s[new])
        js.throughput_version += 1
        outcome = "switched"
    rule.request = rule.decide(js.steps_done)
    return outcome
