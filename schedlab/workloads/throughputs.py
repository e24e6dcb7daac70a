"""Gavel's measured throughput table, GPU prices, and a co-location (space-sharing) model.

Throughput table
    ``schedlab/data/gavel_throughputs.json`` holds, for every (job type, scale factor) that
    Gavel's generator produced in its 1000-job reference trace, the whole-job throughput in
    steps/s on ``scale_factor`` GPUs of each accelerator type (v100, p100, k80).  The numbers are
    Gavel's own measurements (``scheduler/simulation_throughputs.json``, entry
    ``[type]["(job_type, scale_factor)"]["null"]``, i.e. the job running alone), copied
    exactly as the trace records them.  :func:`build_throughput_table` re-derives the file from
    the trace.  A combination absent from the trace is listed under ``missing`` and never
    invented; a throughput of ``0.0`` is Gavel's own entry and means the job cannot run on that
    type (ResNet-50 at batch size 128 on 2, 4 or 8 K80s).

Named sources
    :func:`load_throughputs` reads a shipped table by name (:data:`THROUGHPUT_SOURCES`):
    ``gavel`` is the table above; ``shockwave-tacc`` is Shockwave's own measurements
    (``schedlab/data/shockwave/tacc_throughputs.json``, converted from Shockwave's
    ``scheduler/tacc_throughputs.json``; ``schedlab/data/shockwave/SOURCE.md``), the numbers
    its published traces were generated with.  Tables in files are read by
    :mod:`schedlab.workloads.throughput_files`.

Prices
    ``cost_per_hour`` in $ per GPU-hour: v100 2.48, p100 1.46, k80 0.45.  These are the
    on-demand per-GPU list prices of Google Cloud of that period (not AWS prices).  Gavel's
    own cost policies read time-varying spot-price logs instead (AWS p3.2xlarge / p2.xlarge,
    Azure NC6 series, and fixed GCP preemptible prices 0.74 / 0.43 / 0.135 $/h); we ship the
    static list prices because an Instance holds one price per type.

Co-location model
    Gavel measured the throughput of every pair of single-GPU jobs sharing one GPU; that table
    is not available to us, so :func:`colocation_factors` is a documented, deterministic model.
    Each job type has a *GPU intensity* u_k(type) in [0.3, 1], the fraction of a GPU of type k
    it keeps busy when alone (:func:`gpu_intensity`).  When jobs A and B share a GPU of type k,

    .. math::

        f_k(A \\mid B) = \\min\\Bigl(f_{max},\\;
            \\min\\bigl(1, \\tfrac{1}{u_A + u_B}\\bigr)\\,(1 - \\beta\\, u_B)\\Bigr)

    and A runs at ``f_k(A|B) * T[A,k]`` steps/s.  The first factor is time slicing when the two
    demands exceed one GPU; the second is contention (memory bandwidth, caches) that grows with
    the partner's intensity; f_max = 0.9 caps the benefit (two processes on one GPU never both
    run at full speed).  With beta = 0.25 the pair's total normalized throughput
    f(A|B) + f(B|A) has median about 1.30 on v100, 1.15 on p100 and 1.03 on k80 over all type
    pairs, ranges from about 0.75 (two large-batch ResNet-50s on a K80: packing hurts) to 1.8
    (two A3C jobs on a V100), and lies in [1.0, 1.5] for most pairs, as Gavel observed.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.defaults import SHIPPED_THROUGHPUTS
from schedlab.errors import InputError, UnknownNameError
from schedlab.instance import Instance, instance_from_dict, read_document
from schedlab.workloads.precision import stated

log = logging.getLogger(__name__)

THROUGHPUT_TABLE_SCHEMA = "schedlab/throughput-table@1"
DATA_FILE = "gavel_throughputs.json"
#: Shipped throughput tables by name: path inside ``schedlab/data``.
THROUGHPUT_SOURCES: Mapping[str, tuple[str, ...]] = SHIPPED_THROUGHPUTS

#: Gavel's JobTable: model families that Gavel runs data-parallel on 2, 4 or 8 GPUs.
#: Recommendation, A3C and CycleGAN are single-GPU only.
GAVEL_DISTRIBUTED_FAMILIES: tuple[str, ...] = ("ResNet-18", "ResNet-50", "Transformer", "LM")
#: Scale factors Gavel's generator draws.
GAVEL_SCALE_FACTORS: tuple[int, ...] = (1, 2, 4, 8)

#: Interference model constants (see the module docstring).
CONTENTION_BETA = 0.25
MAX_COLOCATED_FACTOR = 0.9
MIN_INTENSITY = 0.3
MAX_INTENSITY = 1.0
#: Intensity of a job type the model does not know (no family match).
DEFAULT_INTENSITY = 0.75

#: family -> (intensity at the smallest batch size, increase per doubling, smallest batch size)
#: on a P100.  Rationale: ResNet-50 and CycleGAN are convolution-heavy and saturate a GPU;
#: ResNet-18, the Transformer and the LSTM LM leave headroom at small batches and fill it as
#: the batch grows; the recommendation MLP is memory-bound but light; A3C spends most of its
#: time in CPU environment workers.
_FAMILY_INTENSITY: dict[str, tuple[float, float, int]] = {
    "ResNet-50": (0.80, 0.05, 16),
    "ResNet-18": (0.60, 0.07, 16),
    "CycleGAN": (0.90, 0.0, 1),
    "Transformer": (0.60, 0.06, 16),
    "LM": (0.55, 0.06, 5),
    "Recommendation": (0.50, 0.05, 512),
    "A3C": (0.45, 0.0, 1),
}
#: A faster GPU finishes its kernels sooner and idles more between them: lower intensity.
_ACCELERATOR_INTENSITY_SCALE: dict[str, float] = {"v100": 0.9, "p100": 1.0, "k80": 1.1}

_JOB_TYPE_RE = re.compile(r"^(?P<family>.*?) \(batch size (?P<batch>\d+)\)$")


# ------------------------------------------------------------------------ throughput table


@dataclass(frozen=True)
class ThroughputTable:
    """Measured throughputs: ``throughputs[job_type][scale_factor][accelerator]`` in steps/s.

    Each value is the throughput of the whole job running alone on ``scale_factor`` GPUs of
    the accelerator type.  ``prices_per_gpu_hour[accelerator]`` is in $ per GPU-hour.
    ``missing`` lists (job_type, scale_factor) combinations Gavel defines but the source does
    not cover; they are absent from ``throughputs``.  ``source`` names where the numbers came
    from: a name of :data:`THROUGHPUT_SOURCES` or the path of the file they were read from
    (errors about a missing entry name it).
    """

    throughputs: Mapping[str, Mapping[int, Mapping[str, float]]]
    accelerators: tuple[str, ...]
    prices_per_gpu_hour: Mapping[str, float]
    missing: tuple[tuple[str, int], ...]
    provenance: Mapping[str, Any]
    source: str = "gavel"

    @property
    def job_types(self) -> list[str]:
        """Job types in sorted order."""
        return sorted(self.throughputs)

    def scale_factors(self, job_type: str) -> list[int]:
        """Scale factors measured for ``job_type``, ascending."""
        return sorted(self.throughputs.get(job_type, {}))

    def has(self, job_type: str, scale_factor: int) -> bool:
        """Whether (job_type, scale_factor) was measured."""
        return scale_factor in self.throughputs.get(job_type, {})

    def throughput(self, job_type: str, scale_factor: int) -> dict[str, float]:
        """{accelerator: steps/s} of ``job_type`` on ``scale_factor`` GPUs.

        Raises :class:`KeyError` naming the combination when it was not measured.
        """
        try:
            return dict(self.throughputs[job_type][scale_factor])
        except KeyError:
            raise KeyError(
                f"no measured throughput for ({job_type!r}, scale factor {scale_factor})"
            ) from None

    def combinations(self) -> list[tuple[str, int]]:
        """Every measured (job_type, scale_factor), sorted."""
        return [(t, s) for t in self.job_types for s in self.scale_factors(t)]


def _table_from_document(doc: Mapping[str, Any], source: str = "gavel") -> ThroughputTable:
    raw = doc["throughputs"]
    throughputs = {
        job_type: {int(sf): {acc: float(v) for acc, v in by_acc.items()}
                   for sf, by_acc in by_sf.items()}
        for job_type, by_sf in raw.items()
    }
    missing = tuple((str(m["job_type"]), int(m["scale_factor"])) for m in doc.get("missing", []))
    return ThroughputTable(
        throughputs=throughputs,
        accelerators=tuple(doc["accelerators"]),
        prices_per_gpu_hour={k: float(v) for k, v in doc["prices_per_gpu_hour"].items()},
        missing=missing,
        provenance=dict(doc.get("provenance", {})),
        source=source,
    )


@functools.cache
def load_throughputs(name: str) -> ThroughputTable:
    """A shipped table by name (:data:`THROUGHPUT_SOURCES`: ``gavel``, ``shockwave-tacc``),
    read once.  An unknown name raises :class:`~schedlab.errors.UnknownNameError` naming the
    field ``throughputs``."""
    if name not in THROUGHPUT_SOURCES:
        raise UnknownNameError(f"unknown throughput source {name!r} (known: "
                               f"{', '.join(THROUGHPUT_SOURCES)})", field="throughputs")
    parts = THROUGHPUT_SOURCES[name]
    text = resources.files("schedlab").joinpath("data", *parts).read_text(encoding="utf-8")
    doc = json.loads(text)
    if doc.get("schema") != THROUGHPUT_TABLE_SCHEMA:
        raise InputError(f"expected schema {THROUGHPUT_TABLE_SCHEMA!r}", file="/".join(parts))
    return _table_from_document(doc, source=name)


def load_gavel_throughputs() -> ThroughputTable:
    """The shipped Gavel table (``schedlab/data/gavel_throughputs.json``), read once:
    ``load_throughputs("gavel")``."""
    return load_throughputs("gavel")


def gavel_prices() -> dict[str, float]:
    """Price per GPU-hour in $ by accelerator type: v100 2.48, p100 1.46, k80 0.45."""
    return dict(load_gavel_throughputs().prices_per_gpu_hour)


def build_throughput_table(trace_path: str | Path) -> dict[str, Any]:
    """Derive the throughput-table document from a Gavel trace file (the shipped file's source).

    For every job of the trace, ``(job_type, scale_factor) -> throughputs_steps_per_s``.
    Every job of one combination must carry identical numbers (they come from one table);
    a disagreement raises :class:`InputError`.  Combinations of Gavel's JobTable that the
    trace never sampled are listed under ``missing``.
    """
    doc = read_document(trace_path)
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise InputError("a Gavel trace has a 'jobs' list", file=str(trace_path))
    table: dict[str, dict[int, dict[str, float]]] = {}
    counts: dict[str, dict[int, int]] = {}
    for i, job in enumerate(doc["jobs"]):
        try:
            job_type = str(job["job_type"])
            sf = int(job["scale_factor"])
            by_acc = {str(k): float(v) for k, v in job["throughputs_steps_per_s"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"malformed job: {exc}", file=str(trace_path),
                             field=f"jobs[{i}]") from None
        known = table.setdefault(job_type, {}).get(sf)
        if known is not None and known != by_acc:
            raise InputError(
                f"throughputs of ({job_type!r}, {sf}) disagree with an earlier job",
                file=str(trace_path), field=f"jobs[{i}].throughputs_steps_per_s",
            )
        table[job_type][sf] = by_acc
        counts.setdefault(job_type, {}).setdefault(sf, 0)
        counts[job_type][sf] += 1
    accelerators = sorted({acc for by_sf in table.values() for t in by_sf.values() for acc in t})
    order = {"v100": 0, "p100": 1, "k80": 2}
    accelerators.sort(key=lambda a: (order.get(a, 99), a))
    missing = []
    for job_type in sorted(table):
        family = _family_and_batch(job_type)[0]
        expected = GAVEL_SCALE_FACTORS if family in GAVEL_DISTRIBUTED_FAMILIES else (1,)
        for sf in expected:
            if sf not in table[job_type]:
                missing.append({
                    "job_type": job_type, "scale_factor": sf,
                    "why": "data-parallel in Gavel's JobTable, but the trace never sampled it; "
                           "not invented, so the generator never draws it",
                })
    meta = doc.get("meta", {}) if isinstance(doc.get("meta"), dict) else {}
    return {
        "schema": THROUGHPUT_TABLE_SCHEMA,
        "description": (
            "Whole-job throughput (steps/s on scale_factor GPUs, job running alone) per "
            "(job type, scale factor) and accelerator type, as measured by Gavel."
        ),
        "provenance": {
            "source": "Gavel (github.com/stanford-futuredata/gavel) "
                      + str(meta.get("throughputs_file", "scheduler/simulation_throughputs.json"))
                      + ", isolated ('null') entries",
            "gavel_commit": meta.get("gavel_commit"),
            "extracted_from": (
                f"{Path(trace_path).name}: {len(doc['jobs'])} jobs from Gavel's own generator "
                f"(seed {meta.get('seed')}, {meta.get('rate_jobs_per_hr')} jobs/h, multi-GPU "
                f"{meta.get('multi_gpu')}); every job of one (type, scale factor) agrees exactly"
            ),
            "jobs_per_entry": {t: {str(s): n for s, n in sorted(c.items())}
                               for t, c in sorted(counts.items())},
            "zero_throughput": "0.0 is Gavel's own entry: the job cannot run on that type",
        },
        "units": {"throughputs": "steps/s", "prices_per_gpu_hour": "$ per GPU-hour"},
        "accelerators": accelerators,
        "prices_per_gpu_hour": {"v100": 2.48, "p100": 1.46, "k80": 0.45},
        "prices_source": (
            "on-demand per-GPU list prices of Google Cloud of that period (not AWS prices); "
            "Gavel's own cost policies read time-varying spot-price "
            "logs (AWS, Azure) and fixed GCP preemptible prices (0.74, 0.43, 0.135 $/h)"
        ),
        "missing": missing,
        "throughputs": {
            t: {str(s): {a: table[t][s][a] for a in accelerators if a in table[t][s]}
                for s in sorted(table[t])}
            for t in sorted(table)
        },
    }


# ------------------------------------------------------------------------ co-location model


def _family_and_batch(job_type: str) -> tuple[str, int | None]:
    match = _JOB_TYPE_RE.match(job_type)
    if match is None:
        return job_type, None
    return match.group("family"), int(match.group("batch"))


def gpu_intensity(job_type: str | None, accelerator: str) -> float:
    """u_k(type): fraction of one GPU of type ``accelerator`` the job keeps busy alone.

    u = clip(a_k * (base + slope * log2(batch / batch_min)), 0.3, 1.0), with (base, slope,
    batch_min) per model family and a_k = 0.9 (v100), 1.0 (p100), 1.1 (k80), 1.0 otherwise.
    A job type outside Gavel's families gets base 0.75.
    """
    scale = _ACCELERATOR_INTENSITY_SCALE.get(accelerator, 1.0)
    if job_type is None:
        return min(MAX_INTENSITY, max(MIN_INTENSITY, scale * DEFAULT_INTENSITY))
    family, batch = _family_and_batch(job_type)
    base, slope, batch_min = _FAMILY_INTENSITY.get(family, (DEFAULT_INTENSITY, 0.0, 1))
    raw = base + (slope * math.log2(batch / batch_min) if batch is not None else 0.0)
    return min(MAX_INTENSITY, max(MIN_INTENSITY, scale * raw))


def colocation_factors(
    job_type_a: str | None, job_type_b: str | None, accelerator: str
) -> tuple[float, float]:
    """(f(A|B), f(B|A)): fractions of their solo throughputs A and B keep on one shared GPU.

    f(A|B) = min(0.9, min(1, 1/(u_A + u_B)) * (1 - 0.25 u_B)), u from :func:`gpu_intensity`;
    both lie in (0, 0.9].
    """
    u_a = gpu_intensity(job_type_a, accelerator)
    u_b = gpu_intensity(job_type_b, accelerator)
    time_share = min(1.0, 1.0 / (u_a + u_b))
    f_a = min(MAX_COLOCATED_FACTOR, time_share * (1.0 - CONTENTION_BETA * u_b))
    f_b = min(MAX_COLOCATED_FACTOR, time_share * (1.0 - CONTENTION_BETA * u_a))
    return f_a, f_b


def _partner_pairs(
    candidates: list[int], partners_per_job: int | None, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """Unordered pairs (a < b) of positions: all pairs, or each job's random partners."""
    if partners_per_job is None or partners_per_job >= len(candidates) - 1:
        return [(a, b) for i, a in enumerate(candidates) for b in candidates[i + 1:]]
    pairs: set[tuple[int, int]] = set()
    for a in candidates:
        others = np.array([b for b in candidates if b != a])
        chosen = rng.choice(others, size=partners_per_job, replace=False)
        for b in chosen.tolist():
            pairs.add((min(a, b), max(a, b)))
    return sorted(pairs)


def add_colocation(
    instance: Instance,
    *,
    partners_per_job: int | None = None,
    seed: int | np.random.Generator = 0,
    accelerators: Iterable[str] | None = None,
) -> Instance:
    """Return a copy of ``instance`` with ``colocated_throughput`` for pairs of single-GPU jobs.

    Only jobs with ``scale_factor == 1`` are packed (as Gavel).  ``partners_per_job=None``
    lists every pair; an integer p makes each job draw p distinct random partners (seeded), and
    a pair drawn by either job is listed on both, so a job may end up with more than p.
    For a pair (A, B) and each accelerator type k in ``accelerators`` (default: the cluster's)
    on which both have a solo throughput, A's entry is f_k(A|B) * T[A,k] steps/s
    (:func:`colocation_factors`), B's is f_k(B|A) * T[B,k]; both are <= the solo throughput.
    Existing co-location entries are replaced.  The result is validated.
    """
    if partners_per_job is not None and partners_per_job < 0:
        raise ValueError("partners_per_job must be >= 0")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    wanted = list(accelerators) if accelerators is not None else instance.types
    unknown = [k for k in wanted if k not in instance.cluster.accelerators]
    if unknown:
        raise InputError(f"unknown accelerator(s) {unknown}", file=instance.name,
                         field="cluster.accelerators")
    data = instance.to_dict()
    jobs = data["jobs"]
    for job in jobs:
        job.pop("colocated_throughput", None)
    single = [i for i, job in enumerate(jobs) if job.get("scale_factor", 1) == 1]
    pairs = _partner_pairs(single, partners_per_job, rng)
    for a, b in pairs:
        job_a, job_b = jobs[a], jobs[b]
        entry_a: dict[str, float] = {}
        entry_b: dict[str, float] = {}
        for k in wanted:
            if k not in job_a["throughput"] or k not in job_b["throughput"]:
                continue
            f_a, f_b = colocation_factors(job_a.get("job_type"), job_b.get("job_type"), k)
            entry_a[k] = stated(f_a * float(job_a["throughput"][k]))
            entry_b[k] = stated(f_b * float(job_b["throughput"][k]))
        if not entry_a:
            continue
        job_a.setdefault("colocated_throughput", {})[job_b["id"]] = entry_a
        job_b.setdefault("colocated_throughput", {})[job_a["id"]] = entry_b
    log.debug("co-located %d pairs of %d single-GPU jobs", len(pairs), len(single))
    return instance_from_dict(data, source=instance.name)
