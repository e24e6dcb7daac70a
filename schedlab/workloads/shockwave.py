"""Shockwave workloads: its trace generator, draw for draw, and the example instances.

Shockwave (NSDI'23) evaluates on synthetic traces of jobs that change batch size while they
train.  This module follows its generator (github.com/uw-mad-dash/shockwave at commit
8a44f4a: ``scheduler/scripts/utils/generate_trace.py`` and ``scheduler/utils.py:
generate_job``, ``generate_pickle_file``, ``get_metric``), with every rule as a table:

- **job template**: uniform over the 21 templates (model, initial batch size b0) of
  :data:`~schedlab.workloads.shockwave_adaptation.JOB_TEMPLATES`;
- **scale factor**: 1, 2, 4, 8 w.p. :data:`SHOCKWAVE_SCALE_FACTOR_MIX` (0.6, 0.3, 0.09,
  0.01), drawn only for the distributed families; Recommendation jobs run on 1 GPU;
- **duration** on the job's GPUs: a grid of 100 values ``numpy.linspace(0.2, 5, 100)`` hours;
  a slice of the grid is picked w.p. :data:`DURATION_SLICE_PROBS` (0.72, 0.20, 0.05, 0.03 for
  [0, 20%), [20, 50%), [50, 90%), [90, 100%] of the grid), then a value uniformly inside it;
  seconds = round(3600 x hours);
- **mode**: static / accordion / gns w.p. :data:`SHOCKWAVE_MODE_MIX` (0, 0.5, 0.5); an
  accordion job shorter than :data:`ACCORDION_MIN_DURATION_S` (1000 s) becomes static;
- **arrivals**: the first job at 0 s, then gaps ~ Exponential(mean ``mean_gap_s``, 40 s in
  the canonical trace); a trace stores whole seconds (the cumulative time truncated);
- **epochs**: total_steps = int(duration_s x T[b0, s, v100]) (the trace's whole steps),
  E = ceil(total_steps / ceil(N_model / b0)) with N_model the dataset size of
  :data:`~schedlab.workloads.shockwave_adaptation.DATASET_SAMPLES`;
- **batch schedule**: :func:`~schedlab.workloads.shockwave_adaptation.batch_schedule`;
- **seconds per epoch** at batch size b: (N_model / b) / T[model at b, s, v100], T from a
  measured throughput table (:mod:`schedlab.workloads.throughputs`): ``throughputs="gavel"``
  (the default here) or ``"shockwave-tacc"``, Shockwave's own measurements.

**Randomness, draw for draw.**  Shockwave seeds five ``random.Random`` objects (templates
``seed``, arrivals ``seed + 1``, slice picks ``seed + 2``, scale factors ``seed + 3``, modes
``seed + 4``) and numpy's global ``RandomState(seed)`` (the value inside a slice).  Here each
stream is a numpy ``MT19937`` bit generator put in exactly the state that seeding gives
(:class:`PythonRandomStream`, :class:`LegacyNumpyStream`), and the draws are made the same way
(``random()`` from a ``numpy.random.Generator``: the same 53-bit double; ``choice`` by
CPython's rejection on the top bits; numpy's legacy ``choice`` by masked rejection).  So a
seed gives the same template, scale factor, duration, mode and arrival as Shockwave's
generator with that seed: seed 25 reproduces these fields of its published 120-job trace
``120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace``.  With
``throughputs="shockwave-tacc"`` (the table that trace was made with) the steps, epochs and
seconds per epoch are Shockwave's too, and
:func:`~schedlab.workloads.shockwave_trace.format_shockwave_trace` writes that trace byte for
byte; with Gavel's table (the default) they differ (docs/workloads.md).

Shockwave's generator as published passes ``duration_generator_func.pop(0)`` (it only runs
with the Pollux durations); we follow the evident intent (the grid sampler), which is how its
published traces were made.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.atomic import write_bytes_atomic
from schedlab.errors import InputError
from schedlab.instance import INSTANCE_SCHEMA, MAX_JOBS, Instance, instance_from_dict
from schedlab.workloads.gavel import compact_instance_dict
from schedlab.workloads.precision import stated
from schedlab.workloads.shockwave_adaptation import (
    ADAPTATIONS,
    DATASET_SAMPLES,
    DISTRIBUTED_MODELS,
    JOB_TEMPLATES,
    Adaptation,
    batch_schedule,
    usable_batch_sizes,
)
from schedlab.workloads.throughput_files import resolve_throughputs
from schedlab.workloads.throughputs import ThroughputTable, gavel_prices

log = logging.getLogger(__name__)

#: Shockwave's canonical cluster: 32 V100s (scheduler/reproduce/tacc_32gpus.sh, 32:0:0).
SHOCKWAVE_CLUSTER: Mapping[str, int] = {"v100": 32}
#: Round length, s (``--time_per_iteration 120`` in the reproduction scripts).
SHOCKWAVE_ROUND_S = 120.0
#: Shockwave's planning window, rounds (the policy's ``future_rounds`` of its configuration).
SHOCKWAVE_WINDOW_ROUNDS = 20
#: Mean gap between arrivals in the canonical trace, s (``--lam 40``).
SHOCKWAVE_MEAN_GAP_S = 40.0
#: Seed of Shockwave's published 120-job trace (the ``25`` in its file name).
CANONICAL_SEED = 25
#: Seed of the 6-job example: its six jobs show all three modes, batch-size changes under GNS
#: and Accordion and a multi-GPU job, in few epochs (570).
TINY_SEED = 36
#: Duration grid, hours: numpy.linspace(0.2, 5, 100) (``-a 0.2 -b 5 -n 100``).
DURATION_GRID_H: tuple[float, float, int] = (0.2, 5.0, 100)
#: P(slice) of the duration grid (generate_pollux_duration: ``duration_prob``).
DURATION_SLICE_PROBS: tuple[float, ...] = (0.72, 0.20, 0.05, 0.03)
#: Right ends of the slices as fractions of the grid (``duration_boundary``); the slice ends
#: are round(n x fraction) grid points.
DURATION_SLICE_ENDS: tuple[float, ...] = (0.2, 0.5, 0.9, 1.0)
#: P(scale factor) of a distributed job (``--scale-factor-mix 0.6,0.3,0.09,0.01``).
SHOCKWAVE_SCALE_FACTOR_MIX: Mapping[int, float] = {1: 0.6, 2: 0.3, 4: 0.09, 8: 0.01}
#: P(mode) (``--mode-mix 0,0.5,0.5``: static, accordion, gns).
SHOCKWAVE_MODE_MIX: Mapping[str, float] = {"static": 0.0, "accordion": 0.5, "gns": 0.5}
#: Accordion jobs shorter than this many seconds are made static (utils.generate_job).
ACCORDION_MIN_DURATION_S = 1000
#: Accelerator whose throughputs define steps and seconds per epoch (the trace's reference).
REFERENCE_ACCELERATOR = "v100"
#: Throughput source of :func:`generate_shockwave_instance` when none is given (the example
#: instances of ``instances/shockwave/`` are made with it).
DEFAULT_THROUGHPUTS = "gavel"

_SCALE_FACTORS = (1, 2, 4, 8)


# ------------------------------------------------------------------------------ randomness


def _state_dict(key: Sequence[int], pos: int) -> Any:
    """An MT19937 state (numpy's ``bit_generator.state`` layout)."""
    return {"bit_generator": "MT19937",
            "state": {"key": np.asarray(key, dtype=np.uint32), "pos": int(pos)}}


class PythonRandomStream:
    """The draws of CPython's ``random.Random(seed)``, made by a numpy MT19937.

    The bit generator starts in the state that ``random.Random(seed)`` sets (read once from
    the standard library); :meth:`uniform` is ``Generator.random()`` (the same 53-bit double
    from two 32-bit words as CPython's ``random()``) and :meth:`below` is CPython's
    ``_randbelow``: k = n.bit_length() top bits of one word, redrawn while >= n.
    """

    def __init__(self, seed: int) -> None:
        internal = random.Random(seed).getstate()[1]
        self._bits = np.random.MT19937()
        self._bits.state = _state_dict(internal[:624], internal[624])
        self._generator = np.random.Generator(self._bits)

    def uniform(self) -> float:
        """U(0, 1): Python's ``random()`` / ``uniform(0, 1)``."""
        return float(self._generator.random())

    def below(self, n: int) -> int:
        """Uniform integer in [0, n): Python's ``choice`` over n items."""
        k = n.bit_length()
        while True:
            value = int(self._bits.random_raw()) >> (32 - k)
            if value < n:
                return value


class LegacyNumpyStream:
    """The integer draws of numpy's legacy ``RandomState(seed).choice(n items)``.

    Its MT19937 starts in ``RandomState(seed)``'s state; an index in [0, n) is one 32-bit word
    masked to the smallest all-ones mask >= n - 1, redrawn while > n - 1 (numpy's legacy
    bounded integers).
    """

    def __init__(self, seed: int) -> None:
        self._bits = np.random.MT19937()
        state: Any = np.random.RandomState(seed).get_state(legacy=False)
        self._bits.state = state

    def below(self, n: int) -> int:
        """Uniform integer in [0, n)."""
        top = n - 1
        if top == 0:
            return 0
        mask = top
        for shift in (1, 2, 4, 8, 16):
            mask |= mask >> shift
        while True:
            value = int(self._bits.random_raw()) & mask
            if value <= top:
                return value


# ----------------------------------------------------------------------------------- draws


@dataclass(frozen=True)
class ShockwaveDraws:
    """The random part of a Shockwave trace, one entry per job (arrival order).

    ``template``: index into :data:`~schedlab.workloads.shockwave_adaptation.JOB_TEMPLATES`;
    ``scale_factor``: GPUs; ``duration_slice``: 0..3, the grid slice drawn;
    ``duration_s``: whole seconds; ``mode``: static / accordion / gns (after the short-accordion
    rule); ``arrival_s``: whole seconds.
    """

    template: np.ndarray
    scale_factor: np.ndarray
    duration_slice: np.ndarray
    duration_s: np.ndarray
    mode: tuple[Adaptation, ...]
    arrival_s: np.ndarray


def _check_int(value: Any, field: str, lowest: int, highest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) \
            or not lowest <= value <= highest:
        raise InputError(f"must be an integer in [{lowest}, {highest}], got {value!r}",
                         field=field)
    return int(value)


def _check_mix(mix: Mapping[Any, float], keys: Sequence[Any], field: str) -> tuple[float, ...]:
    """Probabilities in ``keys`` order; they must be finite, >= 0 and sum to 1 (+-1e-3)."""
    unknown = [k for k in mix if k not in keys]
    if unknown:
        raise InputError(f"unknown key(s) {unknown} (known: {list(keys)})", field=field)
    probs = tuple(float(mix.get(k, 0.0)) for k in keys)
    if not all(math.isfinite(p) and p >= 0 for p in probs) or abs(sum(probs) - 1.0) > 1e-3:
        raise InputError(f"needs probabilities >= 0 that sum to 1, got {dict(mix)}",
                         field=field)
    return probs


def _slice_bounds(num_durations: int) -> list[tuple[int, int]]:
    """Grid index ranges [lo, hi) of the four duration slices (Python's round, as the code)."""
    ends = [round(num_durations * f) for f in DURATION_SLICE_ENDS[:-1]] + [num_durations]
    starts = [0, *ends[:-1]]
    return list(zip(starts, ends, strict=True))


def _pick(r: float, cumulative: Sequence[float], *, closed: bool) -> int:
    """Index of the first cumulative bound above r (``closed``: r <= bound counts)."""
    for i, bound in enumerate(cumulative[:-1]):
        if (r <= bound) if closed else (r < bound):
            return i
    return len(cumulative) - 1


def duration_grid_h(min_duration_h: float, max_duration_h: float,
                    num_durations: int) -> np.ndarray:
    """The duration grid in hours: ``numpy.linspace(min, max, n)``."""
    return np.linspace(min_duration_h, max_duration_h, num_durations)


def draw_shockwave_jobs(
    num_jobs: int,
    seed: int = 0,
    *,
    mean_gap_s: float | None = SHOCKWAVE_MEAN_GAP_S,
    multi_gpu: bool = True,
    mode_mix: Mapping[str, float] = SHOCKWAVE_MODE_MIX,
    scale_factor_mix: Mapping[int, float] = SHOCKWAVE_SCALE_FACTOR_MIX,
    min_duration_h: float = DURATION_GRID_H[0],
    max_duration_h: float = DURATION_GRID_H[1],
    num_durations: int = DURATION_GRID_H[2],
) -> ShockwaveDraws:
    """Draw templates, scale factors, durations, modes and arrivals as Shockwave's generator.

    Per job, in Shockwave's order: template (stream ``seed``), scale factor if the family is
    distributed and ``multi_gpu`` (``seed + 3``: r <= 0.6 -> 1, <= 0.9 -> 2, <= 0.99 -> 4,
    else 8 with cumulative sums as the code adds them), slice (``seed + 2``: r < 0.72 ->
    0, < 0.92 -> 1, < 0.97 -> 2, else 3), grid value in the slice (numpy's ``RandomState(seed)``),
    mode (``seed + 4``: r < p_static -> static, < p_static + p_accordion -> accordion, else
    gns), then the arrival (``seed + 1``: previous + (-ln(1 - U)) x mean_gap_s; none drawn for
    the first job).  ``mean_gap_s`` None or 0 puts every arrival at 0 s.
    """
    n = _check_int(num_jobs, "num_jobs", 0, MAX_JOBS)
    seed = _check_int(seed, "seed", 0, 2**32 - 5)
    if mean_gap_s is not None and not (math.isfinite(mean_gap_s) and mean_gap_s >= 0):
        raise InputError(f"must be a finite number >= 0 (or None), got {mean_gap_s!r}",
                         field="mean_gap_s")
    mode_probs = _check_mix(mode_mix, ADAPTATIONS, "mode_mix")
    sf_probs = _check_mix(scale_factor_mix, _SCALE_FACTORS, "scale_factor_mix")
    num_durations = _check_int(num_durations, "num_durations", 1, 1_000_000)
    if not (math.isfinite(min_duration_h) and min_duration_h > 0):
        raise InputError(f"must be a number > 0, got {min_duration_h!r}", field="min_duration_h")
    if not (math.isfinite(max_duration_h) and max_duration_h >= min_duration_h):
        raise InputError(f"must be a number >= min_duration_h ({min_duration_h}), got "
                         f"{max_duration_h!r}", field="max_duration_h")
    bounds = _slice_bounds(num_durations)
    if any(hi <= lo for lo, hi in bounds):
        raise InputError(f"{num_durations} grid points leave a duration slice empty "
                         f"(slices {bounds})", field="num_durations")
    grid = duration_grid_h(min_duration_h, max_duration_h, num_durations)
    slice_cum = list(itertools.accumulate(DURATION_SLICE_PROBS))
    sf_cum = list(itertools.accumulate(sf_probs))
    mode_cum = list(itertools.accumulate(mode_probs))

    templates = PythonRandomStream(seed)
    gaps = PythonRandomStream(seed + 1)
    slices = PythonRandomStream(seed + 2)
    scales = PythonRandomStream(seed + 3)
    modes = PythonRandomStream(seed + 4)
    in_slice = LegacyNumpyStream(seed)

    template = np.zeros(n, dtype=np.int64)
    scale_factor = np.ones(n, dtype=np.int64)
    duration_slice = np.zeros(n, dtype=np.int64)
    duration_s = np.zeros(n)
    arrival_s = np.zeros(n)
    mode: list[Adaptation] = []
    clock = 0.0
    for i in range(n):
        t = templates.below(len(JOB_TEMPLATES))
        template[i] = t
        if multi_gpu and JOB_TEMPLATES[t][0] in DISTRIBUTED_MODELS:
            scale_factor[i] = _SCALE_FACTORS[_pick(scales.uniform(), sf_cum, closed=True)]
        k = _pick(slices.uniform(), slice_cum, closed=False)
        duration_slice[i] = k
        lo, hi = bounds[k]
        hours = float(grid[lo + in_slice.below(hi - lo)])
        duration_s[i] = float(round(3600.0 * hours))
        m = ADAPTATIONS[_pick(modes.uniform(), mode_cum, closed=False)]
        if m == "accordion" and duration_s[i] < ACCORDION_MIN_DURATION_S:
            m = "static"
        mode.append(m)
        if i > 0 and mean_gap_s:
            clock += -math.log(1.0 - gaps.uniform()) * mean_gap_s
        arrival_s[i] = float(math.floor(clock))
    return ShockwaveDraws(template=template, scale_factor=scale_factor,
                          duration_slice=duration_slice, duration_s=duration_s,
                          mode=tuple(mode), arrival_s=arrival_s)


# -------------------------------------------------------------------------------- profiles


def job_type_label(model: str, batch_size: int) -> str:
    """Gavel's job-type name, e.g. ``"ResNet-18 (batch size 32)"``."""
    return f"{model} (batch size {batch_size})"


@dataclass
class _Throughputs:
    """Whole-job throughputs from the table, with the substitutions made (logged once each)."""

    table: ThroughputTable
    substituted: dict[tuple[str, int], int]

    def _missing(self, job_type: str, reason: str, needed_by: str) -> InputError:
        """The error of an entry the table lacks: names the table's file and the job type."""
        return InputError(f"{reason} ({needed_by} needs it)", file=self.table.source,
                          field=f"throughputs[{job_type!r}]")

    def of(self, model: str, batch_size: int, scale_factor: int,
           needed_by: str = "a job") -> dict[str, float]:
        """{accelerator: steps/s} of the model at ``batch_size`` on ``scale_factor`` GPUs.

        A combination the table lacks (Gavel's LM at batch size 20 on 8 GPUs) takes the
        throughput measured on the largest smaller GPU count: no speed-up assumed.  A job type
        the table lacks altogether, or without a V100 throughput > 0 (the reference), raises
        :class:`~schedlab.errors.InputError` naming the table's file (or name) and the job
        type; ``needed_by`` says which job needs it.
        """
        job_type = job_type_label(model, batch_size)
        if self.table.has(job_type, scale_factor):
            measured = self.table.throughput(job_type, scale_factor)
        else:
            known = self.table.scale_factors(job_type)
            smaller = [s for s in known if s < scale_factor]
            if not smaller:
                reason = ("job type not in the table" if not known else
                          f"measured on {known} GPUs, not on {scale_factor} or fewer")
                raise self._missing(job_type, reason, needed_by)
            if (job_type, scale_factor) not in self.substituted:
                log.warning("%s on %d GPUs is not in the throughput table; using its %d-GPU "
                            "throughput", job_type, scale_factor, smaller[-1])
            self.substituted[(job_type, scale_factor)] = smaller[-1]
            measured = self.table.throughput(job_type, smaller[-1])
        if measured.get(REFERENCE_ACCELERATOR, 0.0) <= 0:
            raise self._missing(job_type, f"no {REFERENCE_ACCELERATOR} throughput > 0 on "
                                f"{scale_factor} GPU(s) (the reference accelerator)", needed_by)
        return measured


def seconds_per_epoch(model: str, batch_size: int, throughput: float) -> float:
    """(N_model / b) / T seconds: one pass over the dataset at ``throughput`` steps/s.

    Shockwave's ``get_metric(..., "duration")`` divides the samples by the batch size without
    rounding up.
    """
    return DATASET_SAMPLES[model] / batch_size / throughput


def epoch_count(model: str, batch_size: int, total_steps: int) -> int:
    """E = ceil(total_steps / ceil(N_model / b0)) (generate_pickle_file)."""
    return math.ceil(total_steps / math.ceil(DATASET_SAMPLES[model] / batch_size))


# ------------------------------------------------------------------------------- instances


def _job_document(job_id: str, model: str, b0: int, scale_factor: int, mode: Adaptation,
                  total_steps: int, arrival_s: float, throughputs: _Throughputs,
                  accelerators: Sequence[str], needed_by: str) -> dict[str, Any]:
    """One job of a Shockwave trace as an instance job (``generate_shockwave_instance``'s
    Returns); ``total_steps`` whole steps at b0."""
    initial = throughputs.of(model, b0, scale_factor, needed_by)
    epochs = epoch_count(model, b0, total_steps)
    schedule = batch_schedule(model, b0, scale_factor, epochs, mode)
    regimes = {
        str(b): stated(seconds_per_epoch(
            model, b, throughputs.of(model, b, scale_factor, needed_by)[REFERENCE_ACCELERATOR]))
        for b in usable_batch_sizes(model, b0, scale_factor, mode)
    }
    return {
        "id": job_id,
        "job_type": job_type_label(model, b0),
        "arrival": float(arrival_s),
        "scale_factor": scale_factor,
        "total_steps": float(total_steps),
        "throughput": {k: initial[k] for k in accelerators if k in initial},
        "epochs": epochs,
        "batch_schedule": [int(b) for b in schedule],
        "regimes": regimes,
        "adaptation": mode,
    }


def _substitution_notes(throughputs: _Throughputs) -> str:
    """The instance description's note on substituted GPU counts ("" when none)."""
    if not throughputs.substituted:
        return ""
    subs = ", ".join(f"{t} on {s} GPUs uses its {used}-GPU throughput"
                     for (t, s), used in sorted(throughputs.substituted.items()))
    return f" Not in the table, substituted: {subs}."


def describe_throughputs(table: ThroughputTable) -> str:
    """How an instance description names its throughput source, e.g. ``the shockwave-tacc
    throughputs (Shockwave's measurements)``."""
    what = {"gavel": "Gavel's measurements", "shockwave-tacc": "Shockwave's measurements"}
    known = what.get(table.source)
    return (f"the {table.source} throughputs ({known})" if known
            else f"the throughputs of {Path(table.source).name}")


def _cluster_document(cluster: Mapping[str, int], table: ThroughputTable) -> dict[str, Any]:
    prices = gavel_prices()
    pools: dict[str, Any] = {}
    for acc, count in cluster.items():
        if acc not in table.accelerators:
            raise InputError(f"no measured throughputs for accelerator {acc!r} (the table has "
                             f"{list(table.accelerators)})", field=f"cluster.{acc}")
        count = _check_int(count, f"cluster.{acc}", 0, 1_000_000)
        pool: dict[str, Any] = {"count": count}
        if acc in prices:
            pool["cost_per_hour"] = prices[acc]
        pools[acc] = pool
    if not pools:
        raise InputError("the cluster needs at least one accelerator type", field="cluster")
    return {"accelerators": pools}


def generate_shockwave_instance(
    num_jobs: int = 120,
    cluster: Mapping[str, int] | None = None,
    seed: int = 0,
    *,
    mean_gap_s: float | None = SHOCKWAVE_MEAN_GAP_S,
    multi_gpu: bool = True,
    mode_mix: Mapping[str, float] = SHOCKWAVE_MODE_MIX,
    scale_factor_mix: Mapping[int, float] = SHOCKWAVE_SCALE_FACTOR_MIX,
    min_duration_h: float = DURATION_GRID_H[0],
    max_duration_h: float = DURATION_GRID_H[1],
    num_durations: int = DURATION_GRID_H[2],
    round_s: float = SHOCKWAVE_ROUND_S,
    window_rounds: int = SHOCKWAVE_WINDOW_ROUNDS,
    name: str | None = None,
    description: str | None = None,
    table: ThroughputTable | None = None,
    throughputs: str | ThroughputTable | None = None,
) -> Instance:
    """A Shockwave trace as an Instance (see the module docstring for every rule).

    Args:
        num_jobs: J; ids "0" ... "J-1" in arrival order.
        cluster: GPUs per accelerator type (default 32 V100s); every type must be in the
            throughput table.  Epoch counts and seconds per epoch always use V100
            throughputs (Shockwave's reference); ``throughput`` lists every cluster type.
        seed: as Shockwave's ``--seed`` (see :func:`draw_shockwave_jobs`).
        mean_gap_s: mean gap between Poisson arrivals, s (Shockwave's ``--lam``); None or 0:
            every job arrives at 0 s.
        multi_gpu: draw scale factors (Shockwave's ``-m``); False: every job on 1 GPU.
        mode_mix, scale_factor_mix, min_duration_h, max_duration_h, num_durations: the
            generator's options (defaults: the canonical trace's).
        round_s, window_rounds: written into ``params`` (Shockwave's 120 s rounds and
            20-round planning window).
        throughputs: the throughput source: ``"gavel"`` (default, Gavel's measurements),
            ``"shockwave-tacc"`` (Shockwave's, the numbers of its published traces), a
            throughput file's path, or a :class:`~schedlab.workloads.throughputs.
            ThroughputTable` (:func:`~schedlab.workloads.throughput_files.
            resolve_throughputs`).  The instance description names it.
        table: a table, the same as ``throughputs=table`` (give one of the two).

    Returns:
        A validated Instance.  Per job: ``job_type`` (model and b0), ``arrival``,
        ``scale_factor``, ``adaptation``, ``epochs`` E, ``batch_schedule`` (E batch sizes),
        ``regimes`` ({batch size: seconds per epoch on ``scale_factor`` V100s} for every
        batch size the job can use, :func:`~schedlab.workloads.shockwave_adaptation.
        usable_batch_sizes`), ``total_steps`` (the trace's whole steps at b0) and
        ``throughput`` at b0 (a simulator that ignores the schedule runs the job static).
    """
    if table is not None and throughputs is not None:
        raise InputError("give throughputs or table, not both", field="throughputs")
    table = resolve_throughputs(table or throughputs or DEFAULT_THROUGHPUTS)
    cluster = dict(SHOCKWAVE_CLUSTER if cluster is None else cluster)
    cluster_doc = _cluster_document(cluster, table)
    if not (isinstance(round_s, int | float) and math.isfinite(round_s) and round_s > 0):
        raise InputError(f"must be a number > 0, got {round_s!r}", field="round_s")
    window_rounds = _check_int(window_rounds, "window_rounds", 1, 1_000_000)
    draws = draw_shockwave_jobs(
        num_jobs, seed, mean_gap_s=mean_gap_s, multi_gpu=multi_gpu, mode_mix=mode_mix,
        scale_factor_mix=scale_factor_mix, min_duration_h=min_duration_h,
        max_duration_h=max_duration_h, num_durations=num_durations)
    rates = _Throughputs(table, {})
    jobs: list[dict[str, Any]] = []
    for i in range(len(draws.template)):
        model, b0 = JOB_TEMPLATES[int(draws.template[i])]
        sf = int(draws.scale_factor[i])
        needed_by = f"generated job {i}"
        initial = rates.of(model, b0, sf, needed_by)[REFERENCE_ACCELERATOR]
        # Shockwave: num_steps = run_time * T, written with %d (truncated)
        total_steps = int(draws.duration_s[i] * initial)
        jobs.append(_job_document(str(i), model, b0, sf, draws.mode[i], total_steps,
                                  float(draws.arrival_s[i]), rates, list(cluster), needed_by))

    n = len(jobs)
    label = name or f"shockwave-{n}jobs-seed{seed}"
    document = {
        "schema": INSTANCE_SCHEMA,
        "name": label,
        "description": (description or (
            f"{n} Shockwave jobs from schedlab.workloads.generate_shockwave_instance({n}, "
            f"{cluster}, seed={seed}, mean_gap_s={mean_gap_s}, multi_gpu={multi_gpu}, "
            f"throughputs={table.source!r}): Shockwave's trace generator draw for draw "
            "(templates, scale factors, durations, modes, arrivals); steps, epochs and "
            f"seconds per epoch from {describe_throughputs(table)}, V100. "
            "regimes lists every batch size a job can use; total_steps and throughput are at "
            "the initial batch size (a simulator that ignores batch_schedule runs the job "
            "static).")) + _substitution_notes(rates),
        "cluster": cluster_doc,
        "jobs": jobs,
        "params": {"round_s": float(round_s), "window_rounds": window_rounds},
    }
    return instance_from_dict(document, source=label)


# -------------------------------------------------------------------------------- examples


def example_instances() -> dict[str, Instance]:
    """The example instances of ``instances/shockwave/``, by file name."""
    canonical = generate_shockwave_instance(
        120, SHOCKWAVE_CLUSTER, seed=CANONICAL_SEED, name="canonical-120jobs-32gpus",
        description=(
            "Shockwave's canonical simulation: 120 jobs on 32 V100s, 120 s rounds, 20-round "
            "window. The draws (templates, scale factors, durations, modes, arrivals) are "
            "those of Shockwave's published trace 120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,"
            "0.01_multigpu_dynamic (seed 25, mean gap 40 s, durations 0.2-5 h on a 100-point "
            "grid, mode mix 0/0.5/0.5, scale-factor mix 0.6/0.3/0.09/0.01); epochs and seconds "
            "per epoch come from Gavel's V100 throughputs, not Shockwave's own measurements. "
            "Written by schedlab.workloads.generate_shockwave_instance(120, {'v100': 32}, "
            "seed=25)."),
    )
    tiny = generate_shockwave_instance(
        6, {"v100": 4}, seed=TINY_SEED, name="tiny-6jobs",
        description=(
            "Six Shockwave jobs on 4 V100s for quick runs, with all three modes (three GNS "
            "jobs that double their batch size, an Accordion job that switches, a static "
            "one): generate_shockwave_instance(6, {'v100': 4}, seed=36), the canonical "
            "generator settings."),
    )
    return {"canonical-120jobs-32gpus.json": canonical, "tiny-6jobs.json": tiny}


def _one_job_per_line(data: Mapping[str, Any]) -> str:
    """JSON with one top-level field per line and the jobs last, one job per line (long
    schedules stay readable)."""
    head = {k: v for k, v in data.items() if k != "jobs"}
    lines = ["{"]
    for key, value in head.items():
        lines.append(f" {json.dumps(key)}: {json.dumps(value, allow_nan=False)},")
    jobs = [json.dumps(job, allow_nan=False, separators=(",", ":")) for job in data["jobs"]]
    lines.append(' "jobs": [')
    lines.extend(f"  {job}," for job in jobs[:-1])
    if jobs:
        lines.append(f"  {jobs[-1]}")
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def save_shockwave_instance(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` without default-valued fields, one job per line, atomically."""
    data = compact_instance_dict(instance)
    write_bytes_atomic(Path(path), _one_job_per_line(data).encode("utf-8"))


def write_example_instances(folder: str | Path) -> list[Path]:
    """(Re)write ``instances/shockwave/`` into ``folder``; return the paths written.

    Deterministic: the same call reproduces the shipped files (to relative 1e-9 on any
    machine: seconds per epoch are stated to 12 significant digits, the rest are integers).
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for file_name, instance in example_instances().items():
        target = out / file_name
        save_shockwave_instance(instance, target)
        written.append(target)
        log.info("wrote %s", target)
    return written
