"""Gavel-style workloads: a seeded job generator, a reader for Gavel traces, example instances.

The generator follows Gavel's own (``scheduler/utils.py: generate_job`` and the simulator's
arrival process, commit c4fa400), with numpy Generators instead of ``random.Random``:

- scale factor s (multi-GPU): 1, 2, 4, 8 with probabilities 0.70, 0.10, 0.15, 0.05
  (Gavel: r ~ U(0,1); r in [0.7, 0.8] -> 2, (0.8, 0.95] -> 4, > 0.95 -> 8);
- job type: uniform over the types measured at that scale factor (Gavel redraws a uniform
  template until it is data-parallel when s > 1, which is the same distribution);
- duration on s V100s, in minutes: 10^U(1.5, 3) with probability 0.8 (short, 32 min to 17 h),
  10^U(3, 4) with probability 0.2 (long, 17 h to 6.9 days);
- total_steps = duration_s * T[type, s, v100] rounded to whole steps (Gavel's reference worker
  type is the V100); derived floats (arrivals, SLOs) are stated to 12 significant digits
  (:mod:`schedlab.workloads.precision`);
- arrivals: all at t = 0, or a Poisson process of rate lambda jobs/hour: the first job at 0 s,
  then exponential gaps of mean 3600 / lambda s;
- priorities (optional): weight 5 with probability 0.2, else 1 (Gavel's multi-priority mix);
- SLOs (optional): slo_s = factor * duration_s, Gavel's factors being 1.2, 2 and 10, each with
  probability about 1/3.

Each purpose draws from its own Generator spawned from ``numpy.random.SeedSequence(seed)``,
so changing, say, the arrival rate leaves job types and durations unchanged.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from schedlab.atomic import write_bytes_atomic
from schedlab.defaults import ROUND_S
from schedlab.errors import InputError
from schedlab.instance import (
    INSTANCE_SCHEMA,
    MAX_JOBS,
    Instance,
    instance_from_dict,
    read_document,
)
from schedlab.workloads.precision import stated, whole_steps
from schedlab.workloads.throughputs import ThroughputTable, add_colocation, load_gavel_throughputs

log = logging.getLogger(__name__)

#: The paper's simulated cluster: 36 V100, 36 P100, 36 K80 (GPUs).
GAVEL_CLUSTER: Mapping[str, int] = {"v100": 36, "p100": 36, "k80": 36}
#: P(scale factor) in Gavel's generator (Philly-derived).
GAVEL_SCALE_FACTOR_MIX: Mapping[int, float] = {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}
#: P(long job); short: log10(minutes) ~ U(1.5, 3), long: log10(minutes) ~ U(3, 4).
GAVEL_LONG_JOB_FRACTION = 0.2
SHORT_LOG10_MINUTES = (1.5, 3.0)
LONG_LOG10_MINUTES = (3.0, 4.0)
#: P(weight) of Gavel's multi-priority mix.
GAVEL_PRIORITY_MIX: Mapping[float, float] = {1.0: 0.8, 5.0: 0.2}
#: SLO factors of Gavel's generator (slo = factor x duration), drawn uniformly.
GAVEL_SLO_FACTORS: tuple[float, ...] = (1.2, 2.0, 10.0)
#: Durations are defined on this accelerator type (total_steps = duration x its throughput).
REFERENCE_ACCELERATOR = "v100"
#: Gavel's round length, s.
GAVEL_ROUND_S = ROUND_S

_STREAMS = ("scale_factor", "job_type", "duration", "arrival", "priority", "slo", "colocation")


def _streams(seed: int) -> dict[str, np.random.Generator]:
    children = np.random.SeedSequence(seed).spawn(len(_STREAMS))
    return {name: np.random.default_rng(child) for name, child in zip(_STREAMS, children,
                                                                        strict=True)}


def _cluster_document(cluster: Mapping[str, int], table: ThroughputTable) -> dict[str, Any]:
    accelerators: dict[str, Any] = {}
    for acc, count in cluster.items():
        if acc not in table.accelerators:
            raise InputError(
                f"no measured throughputs for accelerator {acc!r} "
                f"(the Gavel table has {list(table.accelerators)})",
                field=f"cluster.{acc}",
            )
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise InputError(f"GPU count must be a non-negative integer, got {count!r}",
                             field=f"cluster.{acc}")
        pool: dict[str, Any] = {"count": int(count)}
        price = table.prices_per_gpu_hour.get(acc)
        if price is not None:
            pool["cost_per_hour"] = price
        accelerators[acc] = pool
    if not accelerators:
        raise InputError("the cluster needs at least one accelerator type", field="cluster")
    return {"accelerators": accelerators}


def _normalized(mix: Mapping[Any, float], what: str) -> tuple[list[Any], np.ndarray]:
    values = list(mix)
    probs = np.array([float(mix[v]) for v in values])
    if len(values) == 0 or np.any(probs < 0) or probs.sum() <= 0 or not np.all(np.isfinite(probs)):
        raise InputError(f"{what} needs non-negative probabilities with a positive sum")
    return values, probs / probs.sum()


def generate_gavel_instance(
    num_jobs: int,
    cluster: Mapping[str, int] | None = None,
    seed: int = 0,
    *,
    jobs_per_hour: float | None = None,
    multi_gpu: bool = True,
    priority_mix: bool | Mapping[float, float] = False,
    colocation: bool = False,
    colocation_partners: int | None = None,
    entities: int | None = None,
    slo_factor: float | Sequence[float] | None = None,
    name: str | None = None,
    description: str | None = None,
    table: ThroughputTable | None = None,
) -> Instance:
    """Draw ``num_jobs`` Gavel-style jobs for ``cluster`` ({type: GPUs}, default 36:36:36).

    Args:
        num_jobs: number of jobs J (ids "0" ... "J-1", in arrival order).
        cluster: GPUs per accelerator type; every type must be in the throughput table.
            ``cost_per_hour`` is set from :func:`~schedlab.workloads.throughputs.gavel_prices`.
        seed: seeds one ``numpy.random.SeedSequence``; each purpose (scale factors, job types,
            durations, arrivals, priorities, SLOs, co-location partners) gets its own child.
        jobs_per_hour: None puts every arrival at 0 s; a rate lambda gives Poisson arrivals
            (first at 0 s, gaps ~ Exponential(mean 3600 / lambda s)).
        multi_gpu: draw scale factors from :data:`GAVEL_SCALE_FACTOR_MIX`; False: all 1.
            Only combinations that were measured and that fit some pool (s <= n_k, with a
            positive throughput there) are drawn; the mix is renormalized over the scale
            factors left, so every job can run.
        priority_mix: False: every weight 1.  True: Gavel's mix (5 w.p. 0.2, else 1).
            A mapping {weight: probability} gives any other mix, e.g. {1: 0.7, 2: 0.2, 5: 0.1}.
        colocation: add ``colocated_throughput`` for pairs of single-GPU jobs
            (:func:`~schedlab.workloads.throughputs.add_colocation`).
        colocation_partners: with ``colocation``, None lists all pairs; p draws p random
            partners per job.
        entities: assign jobs round-robin to ``entities`` entities "e0", "e1", ...
        slo_factor: slo_s = factor x duration_s (duration on the job's s V100s); a sequence
            is sampled uniformly per job (:data:`GAVEL_SLO_FACTORS` is Gavel's).
        name, description: stored in the instance (defaults describe the call).
        table: throughput table (default: the shipped Gavel table).

    Returns:
        A validated :class:`~schedlab.instance.Instance` with, per job, throughput[k] =
        T[type, s, k] for every cluster type k and total_steps = duration_s x T[type, s, v100]
        (whole steps).
    """
    if isinstance(num_jobs, bool) or not isinstance(num_jobs, int) or not 0 <= num_jobs <= MAX_JOBS:
        raise InputError(f"num_jobs must be an integer in [0, {MAX_JOBS}], got {num_jobs!r}")
    if jobs_per_hour is not None and not (np.isfinite(jobs_per_hour) and jobs_per_hour > 0):
        raise InputError(f"jobs_per_hour must be positive, got {jobs_per_hour!r}")
    if entities is not None and entities < 1:
        raise InputError(f"entities must be >= 1, got {entities!r}")
    table = table or load_gavel_throughputs()
    cluster = dict(GAVEL_CLUSTER if cluster is None else cluster)
    cluster_doc = _cluster_document(cluster, table)
    rngs = _streams(seed)

    # Combinations a job can actually run: measured, and some pool fits its gang.
    def runnable(job_type: str, sf: int) -> bool:
        by_acc = table.throughputs[job_type][sf]
        return any(n >= sf and by_acc.get(k, 0.0) > 0 for k, n in cluster.items())

    types_by_sf: dict[int, list[str]] = {}
    for job_type, sf in table.combinations():
        if (multi_gpu or sf == 1) and sf in GAVEL_SCALE_FACTOR_MIX and runnable(job_type, sf):
            types_by_sf.setdefault(sf, []).append(job_type)
    if not types_by_sf:
        raise InputError(f"no job type can run on cluster {cluster}", field="cluster")
    mix = {sf: p for sf, p in GAVEL_SCALE_FACTOR_MIX.items() if sf in types_by_sf}
    dropped = sorted(set(GAVEL_SCALE_FACTOR_MIX) - set(mix)) if multi_gpu else []
    if dropped:
        log.info("scale factors %s fit no pool of %s; mix renormalized", dropped, cluster)
    sf_values, sf_probs = _normalized(mix, "scale-factor mix")

    n = num_jobs
    scale_factors = rngs["scale_factor"].choice(np.array(sf_values), size=n, p=sf_probs)
    type_draw = rngs["job_type"].random(n)
    long_job = rngs["duration"].random(n) < GAVEL_LONG_JOB_FRACTION
    lo = np.where(long_job, LONG_LOG10_MINUTES[0], SHORT_LOG10_MINUTES[0])
    hi = np.where(long_job, LONG_LOG10_MINUTES[1], SHORT_LOG10_MINUTES[1])
    duration_s = 60.0 * 10.0 ** (lo + (hi - lo) * rngs["duration"].random(n))
    if jobs_per_hour is None:
        arrivals = np.zeros(n)
    else:
        gaps = rngs["arrival"].exponential(3600.0 / jobs_per_hour, size=n)
        arrivals = np.concatenate(([0.0], np.cumsum(gaps[:-1]))) if n else np.zeros(0)
    if priority_mix is False:
        weights = np.ones(n)
    else:
        weight_mix = GAVEL_PRIORITY_MIX if priority_mix is True else priority_mix
        values, probs = _normalized(weight_mix, "priority_mix")
        weights = rngs["priority"].choice(np.array(values, dtype=float), size=n, p=probs)
    if slo_factor is None:
        slo_factors = None
    elif isinstance(slo_factor, int | float):
        slo_factors = np.full(n, float(slo_factor))
    else:
        slo_factors = rngs["slo"].choice(np.array(list(slo_factor), dtype=float), size=n)

    jobs: list[dict[str, Any]] = []
    for i in range(n):
        sf = int(scale_factors[i])
        candidates = types_by_sf[sf]
        job_type = candidates[min(int(type_draw[i] * len(candidates)), len(candidates) - 1)]
        measured = table.throughputs[job_type][sf]
        job: dict[str, Any] = {
            "id": str(i),
            "job_type": job_type,
            "arrival": stated(float(arrivals[i])),
            "weight": float(weights[i]),
            "scale_factor": sf,
            "total_steps": whole_steps(float(duration_s[i]) * measured[REFERENCE_ACCELERATOR]),
            "throughput": {k: measured[k] for k in cluster if k in measured},
        }
        if entities is not None:
            job["entity"] = f"e{i % entities}"
        if slo_factors is not None:
            job["slo_s"] = stated(float(slo_factors[i] * duration_s[i]))
        jobs.append(job)

    label = name or f"gavel-{n}jobs-seed{seed}"
    options = [f"cluster={cluster}", f"seed={seed}", f"jobs_per_hour={jobs_per_hour}",
               f"multi_gpu={multi_gpu}"]
    if priority_mix is not False:
        options.append(f"priority_mix={priority_mix}")
    if entities is not None:
        options.append(f"entities={entities}")
    if slo_factor is not None:
        options.append(f"slo_factor={slo_factor}")
    if colocation:
        options.append(f"colocation=True, colocation_partners={colocation_partners}")
    document = {
        "schema": INSTANCE_SCHEMA,
        "name": label,
        "description": description or (
            f"{n} Gavel-style jobs from schedlab.workloads.generate_gavel_instance("
            f"{n}, {', '.join(options)}); throughputs are Gavel's measurements."
        ),
        "cluster": cluster_doc,
        "jobs": jobs,
        "params": {"round_s": GAVEL_ROUND_S},
    }
    instance = instance_from_dict(document, source=label)
    if colocation:
        instance = add_colocation(instance, partners_per_job=colocation_partners,
                                  seed=rngs["colocation"])
    return instance


# --------------------------------------------------------------------------- trace reader


def instance_from_gavel_trace(
    path: str | Path, num_jobs: int | None = None, *, name: str | None = None
) -> Instance:
    """Read a Gavel trace JSON (``meta`` + ``jobs``) into an Instance.

    Each trace job ``{job_id, arrival_time_s, job_type, scale_factor, total_steps,
    priority_weight, throughputs_steps_per_s}`` becomes a Job with id ``str(job_id)``,
    ``arrival`` (s), ``weight``, ``scale_factor``, ``total_steps`` and ``throughput`` (whole-job
    steps/s on scale_factor GPUs).  The cluster is ``meta.cluster_spec`` (default 36:36:36)
    with Gavel prices; ``params.round_s`` is ``meta.round_s``.  ``num_jobs`` keeps the first
    jobs in file order (arrival order).  Errors name the file and the field.
    """
    source = str(path)
    doc = read_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise InputError("a Gavel trace is an object with a 'jobs' list", file=source,
                         field="jobs")
    meta_raw = doc.get("meta")
    meta: dict[str, Any] = meta_raw if isinstance(meta_raw, dict) else {}
    raw_jobs: list[Any] = doc["jobs"]
    if num_jobs is not None:
        if num_jobs < 0:
            raise InputError(f"num_jobs must be >= 0, got {num_jobs}", file=source)
        raw_jobs = raw_jobs[:num_jobs]
    if len(raw_jobs) > MAX_JOBS:
        raise InputError(f"{len(raw_jobs)} jobs exceed the limit {MAX_JOBS}", file=source,
                         field="jobs")
    table = load_gavel_throughputs()
    spec = meta.get("cluster_spec", GAVEL_CLUSTER)
    if not isinstance(spec, dict):
        raise InputError("cluster_spec must map accelerator types to GPU counts", file=source,
                         field="meta.cluster_spec")
    accelerators: dict[str, Any] = {}
    for acc, count in spec.items():
        pool: dict[str, Any] = {"count": count}
        if acc in table.prices_per_gpu_hour:
            pool["cost_per_hour"] = table.prices_per_gpu_hour[acc]
        accelerators[acc] = pool
    jobs: list[dict[str, Any]] = []
    for i, raw in enumerate(raw_jobs):
        if not isinstance(raw, dict):
            raise InputError("each job must be an object", file=source, field=f"jobs[{i}]")
        missing = [key for key in ("job_id", "job_type", "scale_factor", "total_steps",
                                   "throughputs_steps_per_s") if key not in raw]
        if missing:
            raise InputError(f"missing field(s) {missing}", file=source, field=f"jobs[{i}]")
        jobs.append({
            "id": str(raw["job_id"]),
            "job_type": raw["job_type"],
            "arrival": raw.get("arrival_time_s", 0.0),
            "weight": raw.get("priority_weight", 1.0),
            "scale_factor": raw["scale_factor"],
            "total_steps": raw["total_steps"],
            "throughput": raw["throughputs_steps_per_s"],
        })
    label = name or Path(source).name.split(".")[0]
    round_s = meta.get("round_s", GAVEL_ROUND_S)
    document = {
        "schema": INSTANCE_SCHEMA,
        "name": label,
        "description": (
            f"{len(jobs)} jobs of a Gavel trace generated by Gavel's own workload generator "
            f"(seed {meta.get('seed')}, Poisson arrivals at {meta.get('rate_jobs_per_hr')} "
            f"jobs/h, multi-GPU {meta.get('multi_gpu')}, Gavel commit "
            f"{str(meta.get('gavel_commit'))[:7]}); throughput = Gavel's measured whole-job "
            "steps/s on scale_factor GPUs; total_steps = sampled V100 duration x V100 "
            "throughput; a 0 throughput means the job cannot run on that type."
        ),
        "cluster": {"accelerators": accelerators},
        "jobs": jobs,
        "params": {"round_s": round_s},
    }
    return instance_from_dict(document, source=source)


# --------------------------------------------------------------------------- examples

SMALL_SIX_JOBS_DESCRIPTION = (
    "Hand-checkable max-min fairness case (docs/workloads.md derives it). 2 V100 + 2 K80 "
    "(N = 4), six single-GPU jobs of weight 1 and stylized round throughputs: A1, A2 "
    "(ResNet-50-like, compute-bound) run 10 steps/s on a V100 and 2 on a K80; B1..B4 "
    "(recommendation-like, not GPU-bound) run 3 steps/s on either. Equal-share throughputs "
    "T_eq[A] = (10*2 + 2*2)/4 = 6, T_eq[B] = 3. Expected heterogeneity-aware max-min "
    "fairness: objective t = 10/13 = 0.769231, every job's normalized throughput equal to t; "
    "X[A,v100] = 6/13 = 0.461538 and X[A,k80] = 0 for each A job (unique); the B jobs "
    "together hold 14/13 V100 and all 2 K80 (the symmetric split is X[B,v100] = 7/26 = "
    "0.269231, X[B,k80] = 1/2 per B job; the split among B jobs is not unique). The "
    "heterogeneity-agnostic variant reaches 2/3 (every job 2/3 of a GPU's time)."
)


def small_six_jobs_instance() -> Instance:
    """The hand-checkable 6-job instance (see :data:`SMALL_SIX_JOBS_DESCRIPTION`)."""
    jobs: list[dict[str, Any]] = []
    for i in (1, 2):
        jobs.append({"id": f"A{i}", "job_type": "ResNet-50-like (stylized)",
                     "total_steps": 36000.0, "throughput": {"v100": 10.0, "k80": 2.0}})
    for i in (1, 2, 3, 4):
        jobs.append({"id": f"B{i}", "job_type": "Recommendation-like (stylized)",
                     "total_steps": 10800.0, "throughput": {"v100": 3.0, "k80": 3.0}})
    return instance_from_dict({
        "schema": INSTANCE_SCHEMA,
        "name": "small-6jobs",
        "description": SMALL_SIX_JOBS_DESCRIPTION,
        "cluster": {"accelerators": {"v100": {"count": 2, "cost_per_hour": 2.48},
                                     "k80": {"count": 2, "cost_per_hour": 0.45}}},
        "jobs": jobs,
        "params": {"round_s": GAVEL_ROUND_S},
    }, source="small-6jobs")


_JOB_KEY_ORDER = ("id", "job_type", "arrival", "weight", "scale_factor", "total_steps",
                  "throughput")


def compact_instance_dict(
    instance: Instance, job_keys: Sequence[str] = _JOB_KEY_ORDER
) -> dict[str, Any]:
    """The instance as a plain dict without fields left at their defaults (readable files).

    ``schema``, ``name`` and each job's ``job_keys`` (default: the core Gavel fields id,
    job_type, arrival, weight, scale_factor, total_steps, throughput) are always written, in
    that order, then the job's other non-default fields.
    """
    full = instance.to_dict()
    lean = instance.model_dump(mode="json", by_alias=True, exclude_none=True,
                               exclude_defaults=True)
    out: dict[str, Any] = {"schema": INSTANCE_SCHEMA, "name": instance.name}
    for key in ("description", "cluster"):
        if key in lean:
            out[key] = lean[key]
    jobs = []
    for full_job, lean_job in zip(full["jobs"], lean["jobs"], strict=True):
        job = {k: full_job[k] for k in job_keys if k in full_job}
        job.update({k: v for k, v in lean_job.items() if k not in job})
        jobs.append(job)
    out["jobs"] = jobs
    if lean.get("params"):
        out["params"] = lean["params"]
    return out


def save_instance_compact(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` without default-valued fields, atomically.

    The format follows the suffix: ``.json``, ``.yaml``/``.yml``, or ``.json.gz`` (gzip,
    mtime 0, so the bytes are reproducible).  :func:`~schedlab.instance.load_instance` reads
    all three back to an equal Instance.
    """
    target = Path(path)
    data = compact_instance_dict(instance)
    suffixes = [s.lower() for s in target.suffixes]
    if suffixes[-1:] in ([".yaml"], [".yml"]):
        payload = yaml.safe_dump(data, sort_keys=False, width=100).encode()
    elif suffixes[-1:] == [".gz"]:
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
        payload = gzip.compress(text.encode(), compresslevel=9, mtime=0)
    else:
        payload = (json.dumps(data, indent=1, allow_nan=False) + "\n").encode()
    write_bytes_atomic(target, payload)


def example_instances() -> dict[str, Instance]:
    """The generated example instances, by file name (see docs/workloads.md)."""
    big = generate_gavel_instance(
        300, GAVEL_CLUSTER, seed=0, name="cluster-108gpus-300jobs",
        description=(
            "Gavel's simulated cluster (36 V100, 36 P100, 36 K80 with $/GPU-hour prices) and "
            "300 jobs drawn by schedlab.workloads.generate_gavel_instance(300, "
            "{'v100': 36, 'p100': 36, 'k80': 36}, seed=0): Gavel's scale-factor mix "
            "(1/2/4/8 GPUs), 80% short / 20% long durations, measured throughputs, every "
            "job arriving at t = 0, weight 1."
        ),
    )
    coloc = generate_gavel_instance(
        24, {"v100": 4, "p100": 4, "k80": 4}, seed=1, multi_gpu=False, colocation=True,
        name="colocation-24jobs",
        description=(
            "Space sharing: 24 single-GPU Gavel jobs on 4 V100 + 4 P100 + 4 K80, all arriving "
            "at t = 0, with colocated_throughput for every pair of jobs on every type from "
            "schedlab's documented interference model (docs/workloads.md; Gavel's measured "
            "pair table is not public). Drawn by generate_gavel_instance(24, {'v100': 4, "
            "'p100': 4, 'k80': 4}, seed=1, multi_gpu=False, colocation=True)."
        ),
    )
    yaml_example = generate_gavel_instance(
        4, {"v100": 1, "k80": 1}, seed=2, multi_gpu=False, priority_mix={1.0: 0.5, 2.0: 0.5},
        name="small-4jobs-yaml",
        description=(
            "A small YAML instance (YAML is accepted wherever JSON is): 4 single-GPU Gavel "
            "jobs with weights 1 or 2 on one V100 and one K80, from generate_gavel_instance("
            "4, {'v100': 1, 'k80': 1}, seed=2, multi_gpu=False, priority_mix={1.0: 0.5, "
            "2.0: 0.5})."
        ),
    )
    return {
        "small-6jobs.json": small_six_jobs_instance(),
        "cluster-108gpus-300jobs.json": big,
        "colocation-24jobs.json": coloc,
        "small-4jobs.yaml": yaml_example,
    }


def write_example_instances(
    folder: str | Path, *, trace_path: str | Path | None = None
) -> list[Path]:
    """(Re)write the example instances into ``folder``; return the paths written.

    With ``trace_path`` (Gavel's 1000-job trace JSON), also writes ``trace-1000.json.gz``
    from :func:`instance_from_gavel_trace`.  Everything is deterministic: the same call
    reproduces the shipped ``instances/gavel/`` files, equal to relative 1e-9 on any machine
    (derived floats are stated to 12 significant digits, steps are whole numbers).
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for file_name, instance in example_instances().items():
        target = out / file_name
        save_instance_compact(instance, target)
        written.append(target)
    if trace_path is not None:
        trace = instance_from_gavel_trace(trace_path, name="trace-1000")
        target = out / "trace-1000.json.gz"
        save_instance_compact(trace, target)
        written.append(target)
    for path in written:
        log.info("wrote %s", path)
    return written
