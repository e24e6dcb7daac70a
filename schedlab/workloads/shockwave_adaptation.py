"""Batch-size schedules of Shockwave's dynamically adapting jobs, written as data.

Shockwave (NSDI'23) trains jobs whose batch size changes between epochs.  Its trace tooling
turns each job of a trace into a *profile*: one batch size per epoch (``bs_every_epoch``),
following one of three modes.  Source of every table below: Shockwave's public code,
github.com/uw-mad-dash/shockwave at commit 8a44f4a, ``scheduler/utils.py``
(``get_accordion_bs_pattern``, ``get_gns_bs_pattern``, ``dataset_len``,
``model_dataset_mapping``) and ``scheduler/job_table.py`` (the job templates).

- **static**: the initial batch size b0 in every epoch.
- **accordion** (:func:`accordion_schedule`): epoch e runs the model's largest batch size
  :data:`ACCORDION_MAX_BATCH_SIZE` when e is outside the model's *critical regimes*
  (:data:`ACCORDION_CRITICAL`) **and** e > 0.3 E (the first 30% of the epochs always keep b0);
  otherwise b0.  Transformer jobs keep b0 throughout (Shockwave's code returns early for
  them).
- **gns** (:func:`gns_schedule`): the batch size is multiplied by 2, 4, 8 or 16 from given
  epochs on, per (model, b0, scale factor) case of :data:`GNS_CASES`, then capped at
  :data:`MAX_BATCH_SIZE`.  A case applies only when E exceeds its first epoch.  A quirk of
  the code is kept: only the first multiplier range may reach the last epoch E - 1; the
  later ranges stop at E - 2, so a job whose last epoch falls in a later range ends that
  epoch at b0 again.  Transformer jobs, and cases not in the table, keep b0.

Epochs are 0-based throughout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from schedlab.errors import InputError

Adaptation = Literal["static", "accordion", "gns"]
ADAPTATIONS: tuple[Adaptation, ...] = ("static", "accordion", "gns")

#: Model families of Shockwave's job table, in its order.
MODELS: tuple[str, ...] = ("ResNet-18", "ResNet-50", "Transformer", "LM", "Recommendation")

#: Initial batch sizes of Shockwave's job table (``scheduler/job_table.py``), in its order.
#: Shockwave's table drops ResNet-18 at 16, ResNet-50 at 128 and Transformer at 256 from
#: Gavel's (A3C and CycleGAN are commented out there).
INITIAL_BATCH_SIZES: Mapping[str, tuple[int, ...]] = {
    "ResNet-18": (32, 64, 128, 256),
    "ResNet-50": (16, 32, 64),
    "Transformer": (16, 32, 64, 128),
    "LM": (5, 10, 20, 40, 80),
    "Recommendation": (512, 1024, 2048, 4096, 8192),
}

#: The 21 job templates (model, initial batch size) in the job table's order; the
#: generator's uniform template draw indexes this tuple.
JOB_TEMPLATES: tuple[tuple[str, int], ...] = tuple(
    (model, batch) for model in MODELS for batch in INITIAL_BATCH_SIZES[model]
)

#: Families marked ``distributed=True`` in Shockwave's job table: only these draw a scale
#: factor; Recommendation jobs always run on one GPU.
DISTRIBUTED_MODELS: frozenset[str] = frozenset({"ResNet-18", "ResNet-50", "Transformer", "LM"})

#: Samples per epoch (``dataset_len`` in scheduler/utils.py and ``dataset_size_dict`` in
#: scripts/utils/generate_trace.py).  ResNet-50 and Transformer use Shockwave's sizes, not the
#: full ImageNet / Multi30k.
DATASET_SAMPLES: Mapping[str, int] = {
    "ResNet-18": 50_000,
    "ResNet-50": 100_000,
    "Transformer": 10_000,
    "LM": 59_675,
    "Recommendation": 117_907,
}

#: Dataset of each family (``model_dataset_mapping``), a label.
DATASETS: Mapping[str, str] = {
    "ResNet-18": "CIFAR-10",
    "ResNet-50": "ImageNet",
    "Transformer": "Multi30k",
    "LM": "Wikitext-2",
    "Recommendation": "ML-20M",
}

#: Largest batch size per family (``bs_limit`` of get_gns_bs_pattern): the GNS cap.
MAX_BATCH_SIZE: Mapping[str, int] = {
    "ResNet-18": 256,
    "ResNet-50": 128,
    "Transformer": 128,
    "LM": 80,
    "Recommendation": 8192,
}

#: Batch size Accordion switches to outside critical regimes (``max_bs_dict`` of
#: get_accordion_bs_pattern; the Transformer is absent: Accordion leaves it static).
ACCORDION_MAX_BATCH_SIZE: Mapping[str, int] = {
    "ResNet-18": 256,
    "ResNet-50": 128,
    "LM": 80,
    "Recommendation": 8192,
}

#: Accordion keeps b0 in epochs e <= this fraction x E (``epoch > num_epochs * 0.3``).
ACCORDION_WARMUP_FRACTION = 0.3


@dataclass(frozen=True)
class CriticalRegimes:
    """The epochs in which Accordion keeps the initial batch size, for one model family.

    Epoch e is critical when any of these holds:

    - e < ``head_epochs[b0]`` (a head whose length depends on the initial batch size b0;
      ``head_epochs`` None means no head rule);
    - start <= e < end for a ``(start, end)`` in ``windows``;
    - e < ``period_until`` and e mod ``period`` < ``period_critical`` (a periodic rule).
    """

    head_epochs: Mapping[int, int] | None = None
    windows: tuple[tuple[int, int], ...] = ()
    period: int | None = None
    period_critical: int = 0
    period_until: int = 0

    def critical(self, epochs: np.ndarray, initial_batch_size: int) -> np.ndarray:
        """Boolean mask over ``epochs`` (0-based epoch numbers): which are critical."""
        mask = np.zeros(epochs.shape, dtype=bool)
        if self.head_epochs is not None:
            if initial_batch_size not in self.head_epochs:
                raise InputError(
                    f"Accordion has no critical regime for initial batch size "
                    f"{initial_batch_size} (known: {sorted(self.head_epochs)})",
                    field="batch_size",
                )
            mask |= epochs < self.head_epochs[initial_batch_size]
        for start, end in self.windows:
            mask |= (epochs >= start) & (epochs < end)
        if self.period is not None:
            mask |= (epochs < self.period_until) & (epochs % self.period < self.period_critical)
        return mask


#: Accordion's critical regimes per family (get_accordion_bs_pattern).
ACCORDION_CRITICAL: Mapping[str, CriticalRegimes] = {
    # epochs < 10 (20 at b0 = 256), 150-159 and 250-259
    "ResNet-18": CriticalRegimes(head_epochs={16: 10, 32: 10, 64: 10, 128: 10, 256: 20},
                                 windows=((150, 160), (250, 260))),
    # e mod 30 < 10 for e < 600 (the code lists range(600))
    "ResNet-50": CriticalRegimes(period=30, period_critical=10, period_until=600),
    # epochs < 10
    "LM": CriticalRegimes(head_epochs={5: 10, 10: 10, 20: 10, 40: 10, 80: 10}),
    # epochs < 30 (512, 1024), < 40 (2048), < 10 (4096, 8192); and 60-69, 80-89
    "Recommendation": CriticalRegimes(
        head_epochs={512: 30, 1024: 30, 2048: 40, 4096: 10, 8192: 10},
        windows=((60, 70), (80, 90)),
    ),
}

#: One multiplier range of a GNS case: (first epoch, end epoch exclusive or None for E,
#: multiplier of b0).
GnsRange = tuple[int, int | None, int]

#: GNS batch-size growth per (model, b0, scale factor), transcribed from get_gns_bs_pattern.
#: A case applies when E > its first epoch (the code's ``num_epochs > T`` equals the first
#: range's start in every case).
GNS_CASES: Mapping[tuple[str, int, int], tuple[GnsRange, ...]] = {
    ("ResNet-18", 16, 1): ((31, 41, 2), (41, 51, 4), (51, 71, 8), (71, None, 16)),
    ("ResNet-18", 32, 1): ((21, 31, 2), (31, 51, 4), (51, None, 8)),
    ("ResNet-18", 64, 1): ((11, 31, 2), (31, None, 4)),
    ("ResNet-18", 128, 1): ((11, None, 2),),
    ("ResNet-18", 16, 2): ((21, 31, 2), (31, 91, 4), (91, 111, 8), (111, None, 16)),
    ("ResNet-18", 32, 2): ((11, 21, 2), (21, 41, 4), (41, None, 8)),
    ("ResNet-18", 64, 2): ((21, 41, 2), (41, None, 4)),
    ("ResNet-18", 128, 2): ((41, None, 2),),
    ("ResNet-18", 16, 4): ((11, 21, 2), (21, 81, 4), (81, 91, 8), (91, None, 16)),
    ("ResNet-18", 32, 4): ((21, 31, 2), (31, 61, 4), (61, None, 8)),
    ("ResNet-18", 64, 4): ((11, 61, 2), (61, None, 4)),
    ("ResNet-18", 128, 4): ((11, None, 2),),
    ("ResNet-50", 64, 1): ((101, None, 2),),
    ("ResNet-50", 32, 2): ((101, 111, 2), (111, None, 4)),
    ("ResNet-50", 64, 2): ((81, None, 2),),
    ("ResNet-50", 32, 4): ((131, 221, 2), (221, None, 4)),
    ("ResNet-50", 64, 4): ((191, None, 2),),
    ("LM", 5, 1): ((31, 41, 2), (41, 61, 4), (61, 71, 8), (71, None, 16)),
    ("LM", 10, 1): ((11, 21, 2), (21, 41, 4), (41, None, 8)),
    ("LM", 20, 1): ((11, 41, 2), (41, None, 4)),
    ("LM", 40, 1): ((11, None, 2),),
    ("LM", 5, 2): ((31, 51, 2), (51, 61, 4), (61, 71, 8), (71, None, 16)),
    ("LM", 10, 2): ((11, 31, 2), (31, 41, 4), (41, None, 8)),
    ("LM", 20, 2): ((31, 41, 2), (41, None, 4)),
    ("LM", 40, 2): ((11, None, 2),),
    ("LM", 5, 4): ((11, 31, 2), (31, 71, 4), (71, 91, 8), (91, None, 16)),
    ("LM", 10, 4): ((11, 31, 2), (31, 61, 4), (61, None, 8)),
    ("LM", 20, 4): ((11, 61, 2), (61, None, 4)),
    ("LM", 40, 4): ((61, None, 2),),
    ("Recommendation", 512, 1): ((21, 41, 2), (41, 71, 4), (71, 91, 8), (91, None, 16)),
    ("Recommendation", 1024, 1): ((21, 51, 2), (51, 91, 4), (91, None, 8)),
    ("Recommendation", 2048, 1): ((21, 41, 2), (41, None, 4)),
    ("Recommendation", 4096, 1): ((41, None, 2),),
}

#: Families GNS leaves at b0 (the code returns them before its cap).
GNS_STATIC_MODELS: frozenset[str] = frozenset({"Transformer"})


def _check_family(model: str) -> None:
    if model not in MODELS:
        raise InputError(f"unknown model family {model!r} (known: {list(MODELS)})",
                         field="model")


def _check_epochs(epochs: int) -> None:
    if isinstance(epochs, bool) or not isinstance(epochs, int | np.integer) or epochs < 1:
        raise InputError(f"epochs must be an integer >= 1, got {epochs!r}", field="epochs")


def accordion_schedule(model: str, initial_batch_size: int, epochs: int) -> np.ndarray:
    """Batch size of each of the ``epochs`` epochs of an Accordion job (int64 array).

    b_e = :data:`ACCORDION_MAX_BATCH_SIZE` [model] when e is not critical
    (:data:`ACCORDION_CRITICAL`) and e > 0.3 E; otherwise the initial batch size.
    """
    _check_family(model)
    _check_epochs(epochs)
    schedule = np.full(int(epochs), int(initial_batch_size), dtype=np.int64)
    rule = ACCORDION_CRITICAL.get(model)
    if rule is None:
        return schedule
    e = np.arange(int(epochs))
    large = ~rule.critical(e, int(initial_batch_size)) & (e > epochs * ACCORDION_WARMUP_FRACTION)
    schedule[large] = ACCORDION_MAX_BATCH_SIZE[model]
    return schedule


def gns_schedule(model: str, initial_batch_size: int, scale_factor: int,
                 epochs: int) -> np.ndarray:
    """Batch size of each of the ``epochs`` epochs of a GNS job (int64 array).

    With the case ranges (s_1, t_1, m_1), ..., (s_r, t_r, m_r) of :data:`GNS_CASES` and
    E > s_1: b_e = m_1 b0 for s_1 <= e < min(t_1, E), and b_e = m_i b0 for
    s_i <= e < min(t_i, E - 1) when i > 1 (t = None meaning E); every other epoch keeps b0;
    then b_e = min(b_e, :data:`MAX_BATCH_SIZE` [model]).
    """
    _check_family(model)
    _check_epochs(epochs)
    b0 = int(initial_batch_size)
    n = int(epochs)
    schedule = np.full(n, b0, dtype=np.int64)
    if model in GNS_STATIC_MODELS:
        return schedule
    case = GNS_CASES.get((model, b0, int(scale_factor)))
    if case is not None and n > case[0][0]:
        for k, (start, end, multiplier) in enumerate(case):
            stop = n if end is None else min(end, n)
            if k > 0:
                stop = min(stop, n - 1)
            if stop > start:
                schedule[start:stop] = b0 * multiplier
    return np.minimum(schedule, MAX_BATCH_SIZE[model])


def batch_schedule(model: str, initial_batch_size: int, scale_factor: int, epochs: int,
                   adaptation: Adaptation) -> np.ndarray:
    """The batch size of every epoch for ``adaptation`` (static, accordion or gns)."""
    if adaptation == "static":
        _check_family(model)
        _check_epochs(epochs)
        return np.full(int(epochs), int(initial_batch_size), dtype=np.int64)
    if adaptation == "accordion":
        return accordion_schedule(model, initial_batch_size, epochs)
    if adaptation == "gns":
        return gns_schedule(model, initial_batch_size, scale_factor, epochs)
    raise InputError(f"unknown adaptation {adaptation!r} (known: {list(ADAPTATIONS)})",
                     field="adaptation")


def usable_batch_sizes(model: str, initial_batch_size: int, scale_factor: int,
                       adaptation: Adaptation) -> tuple[int, ...]:
    """The batch sizes a job can run under its adaptation rule, ascending.

    What is known at submission without looking at the job's realized schedule: b0 alone for
    static jobs (and Accordion Transformers, and GNS cases without a table entry); b0 and
    :data:`ACCORDION_MAX_BATCH_SIZE` for Accordion; b0 and min(m b0, cap) for every multiplier
    m of the job's GNS case.  The realized schedule uses a subset of these (a short GNS job
    may never double).
    """
    _check_family(model)
    b0 = int(initial_batch_size)
    sizes = {b0}
    if adaptation == "accordion" and model in ACCORDION_MAX_BATCH_SIZE:
        sizes.add(ACCORDION_MAX_BATCH_SIZE[model])
    elif adaptation == "gns" and model not in GNS_STATIC_MODELS:
        for _, _, multiplier in GNS_CASES.get((model, b0, int(scale_factor)), ()):
            sizes.add(min(b0 * multiplier, MAX_BATCH_SIZE[model]))
    elif adaptation not in ADAPTATIONS:
        raise InputError(f"unknown adaptation {adaptation!r} (known: {list(ADAPTATIONS)})",
                         field="adaptation")
    return tuple(sorted(sizes))
