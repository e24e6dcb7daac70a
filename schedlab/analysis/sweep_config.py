"""Sweep configuration files (YAML) for ``schedlab sweep CONFIG.yaml`` (docs/sweep.md).

A file names policies x workloads x loads x seeds, the cluster, the output folder and a few
options::

    policies: [fifo, srtf]
    seeds: 0-2                      # or [0, 1, 2]
    loads: [4, 8]                   # jobs/hour; null = the workload's own timing
    out: runs/example               # relative to this file's folder
    workloads:
      - kind: gavel
        jobs: 20
        cluster: "4:4:4"
      - {kind: titan, jobs: 8, cluster: v100=8, loads: [null]}
    options: {round_s: 360, workers: 2}

:func:`load_sweep_config` reads and checks a file; every mistake is one
:class:`~schedlab.errors.InputError` naming the file and the field (``workloads[1].jobs``),
raised before anything is run or written.  :meth:`SweepConfig.runs` lists the
:class:`~schedlab.analysis.sweep.RunSpec` of every (workload, policy, load, seed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from schedlab.analysis.sweep import (
    ResultFormat,
    RunSpec,
    WorkloadSpec,
    parse_cluster_spec,
    plan_runs,
)
from schedlab.documents import parse_yaml, read_text
from schedlab.errors import InputError
from schedlab.workloads.throughputs import THROUGHPUT_SOURCES

Backend = Literal["local", "ray"]

WORKLOAD_KINDS: tuple[str, ...] = ("gavel", "shockwave", "trace", "instance", "titan", "hare")
BACKENDS: tuple[str, ...] = ("local", "ray")
MECHANISMS: tuple[str, ...] = ("schedlab", "gavel")
FORMATS: tuple[str, ...] = ("auto", "csv", "parquet")
TRACE_FORMATS: tuple[str, ...] = ("philly", "helios", "pai")
#: Throughput table of a shockwave workload that does not name one (``schedlab simulate``'s).
SHOCKWAVE_THROUGHPUTS = "shockwave-tacc"

#: Per kind: (jobs, cluster spec, loads) when the file does not say.  Gavel and Shockwave
#: follow ``schedlab simulate``'s defaults; Titan is its paper's 64-GPU cluster, Hare its
#: 160-GPU one; None jobs = all of a trace or file (Titan: about one task per GPU).
KIND_DEFAULTS: Mapping[str, tuple[int | None, str | None, tuple[float | None, ...]]] = {
    "gavel": (100, "36:36:36", (6.0,)),
    "shockwave": (120, "v100=32", (90.0,)),
    "trace": (None, "36:36:36", (None,)),
    "instance": (None, None, (None,)),
    "titan": (None, "v100=64", (None,)),
    "hare": (200, "k80=64,p100=48,v100=48", (None,)),
}

TOP_KEYS = frozenset({"policies", "workloads", "seeds", "loads", "cluster", "out", "options"})
OPTION_KEYS = frozenset({"round_s", "mechanism", "format", "workers", "backend", "address",
                         "unfair_threshold"})
#: Keys a workload entry may have, by kind (every kind also takes name, kind, jobs, cluster,
#: loads).
COMMON_WORKLOAD_KEYS = frozenset({"name", "kind", "jobs", "cluster", "loads"})
KIND_KEYS: Mapping[str, frozenset[str]] = {
    "gavel": frozenset({"multi_gpu"}),
    "shockwave": frozenset({"multi_gpu", "throughputs"}),
    "trace": frozenset({"path", "format", "keep_failed"}),
    "instance": frozenset({"path", "static"}),
    "titan": frozenset(),
    "hare": frozenset(),
}


@dataclass(frozen=True)
class SweepWorkload:
    """One workload of the file: its name (a table label), how to build it, its loads."""

    name: str
    spec: WorkloadSpec
    loads: tuple[float | None, ...]


@dataclass(frozen=True)
class SweepConfig:
    """A checked sweep file (module docstring); ``out_dir`` None when the file gives none."""

    path: Path
    policies: tuple[str, ...]
    workloads: tuple[SweepWorkload, ...]
    seeds: tuple[int, ...]
    out_dir: Path | None
    round_s: float | None = None
    mechanism: str = "schedlab"
    fmt: ResultFormat = "auto"
    workers: int = 1
    backend: Backend = "local"
    address: str | None = None
    unfair_threshold: float | None = None

    def runs_of(self, workload: SweepWorkload) -> list[RunSpec]:
        """The runs of one workload: policy x load x seed, in that nesting order."""
        return plan_runs(self.policies, workload.loads, self.seeds, workload.spec,
                         round_s=self.round_s, mechanism=self.mechanism)

    def runs(self) -> list[RunSpec]:
        """Every run of the sweep: workload x policy x load x seed."""
        return [run for workload in self.workloads for run in self.runs_of(workload)]


class _Checker:
    """Raises InputError(reason, file=the config, field=where)."""

    def __init__(self, path: Path) -> None:
        self.file = str(path)

    def fail(self, where: str, reason: str) -> InputError:
        return InputError(reason, file=self.file, field=where)

    def mapping(self, value: Any, where: str, allowed: frozenset[str]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"expected a mapping, got {_kind(value)}")
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            raise self.fail(f"{where}.{unknown[0]}" if where else unknown[0],
                            f"unknown field (expected one of {', '.join(sorted(allowed))})")
        return value

    def name_list(self, value: Any, where: str) -> tuple[str, ...]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise self.fail(where, "expected a non-empty list of names")
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item.strip():
                raise self.fail(f"{where}[{i}]", f"expected a name, got {_kind(item)}")
        names = [item.strip() for item in items]
        if len(set(names)) != len(names):
            raise self.fail(where, "a name is listed twice")
        return tuple(names)

    def seeds(self, value: Any, where: str) -> tuple[int, ...]:
        if isinstance(value, str):
            parts: list[Any] = []
            for part in value.split(","):
                first, dash, last = part.strip().partition("-")
                if not (first.isdigit() and (not dash or last.isdigit())):
                    raise self.fail(where, f"{part.strip()!r} is not a seed or a range a-b")
                parts.extend(range(int(first), int(last) + 1) if dash else [int(first)])
            value = parts
        elif _is_int(value):
            value = [value]
        if not isinstance(value, list) or not value:
            raise self.fail(where, "expected seeds: a list of integers >= 0 or a range "
                            "like 0-4")
        for i, seed in enumerate(value):
            if not _is_int(seed) or seed < 0:
                raise self.fail(f"{where}[{i}]", f"expected an integer >= 0, got {seed!r}")
        if len(set(value)) != len(value):
            raise self.fail(where, "a seed is listed twice")
        return tuple(int(s) for s in value)

    def loads(self, value: Any, where: str) -> tuple[float | None, ...]:
        items = value if isinstance(value, list) else [value]
        if not items:
            raise self.fail(where, "expected a non-empty list of rates (jobs/hour) or null")
        out: list[float | None] = []
        for i, item in enumerate(items):
            at = f"{where}[{i}]" if isinstance(value, list) else where
            if item is None:
                out.append(None)
            elif _is_number(item) and math.isfinite(item) and item > 0:
                out.append(float(item))
            else:
                raise self.fail(at, f"expected a positive rate (jobs/hour) or null, got "
                                f"{item!r}")
        if len(set(out)) != len(out):
            raise self.fail(where, "a load is listed twice")
        return tuple(out)

    def cluster(self, value: Any, where: str) -> tuple[tuple[str, int], ...]:
        if isinstance(value, Mapping):
            text = ",".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, str):
            text = value
        else:
            raise self.fail(where, "expected a cluster like \"36:36:36\", \"v100=8,k80=4\" "
                            f"or a mapping {{v100: 8}}, got {_kind(value)}")
        try:
            return tuple(parse_cluster_spec(text).items())
        except InputError as exc:
            raise self.fail(where, exc.reason) from None

    def positive_int(self, value: Any, where: str) -> int:
        if not _is_int(value) or value < 1:
            raise self.fail(where, f"expected an integer >= 1, got {value!r}")
        return int(value)

    def positive_float(self, value: Any, where: str) -> float:
        if not _is_number(value) or not math.isfinite(value) or value <= 0:
            raise self.fail(where, f"expected a positive number, got {value!r}")
        return float(value)

    def flag(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, f"expected true or false, got {value!r}")
        return value

    def choice(self, value: Any, where: str, choices: Sequence[str]) -> str:
        if value not in choices:
            raise self.fail(where, f"expected one of {', '.join(choices)}, got {value!r}")
        return cast(str, value)

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"expected a non-empty string, got {_kind(value)}")
        return value.strip()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"


def load_sweep_config(path: str | Path) -> SweepConfig:
    """Read and check a sweep file (module docstring).  Relative paths in it (``out``, a
    trace's or instance file's ``path``) are relative to the file's folder."""
    source = Path(path)
    data = parse_yaml(read_text(source), str(source))
    return sweep_config_from_dict(data, source)


def sweep_config_from_dict(data: Any, source: str | Path) -> SweepConfig:
    """Check the parsed contents ``data`` of the sweep file ``source``."""
    source = Path(source)
    base = source.resolve().parent
    check = _Checker(source)
    if data is None:
        raise check.fail("", "the file is empty; it needs policies and workloads")
    top = check.mapping(data, "", TOP_KEYS)
    for key in ("policies", "workloads"):
        if key not in top:
            raise check.fail(key, "missing (required)")
    policies = check.name_list(top["policies"], "policies")
    seeds = check.seeds(top.get("seeds", [0]), "seeds")
    loads = check.loads(top["loads"], "loads") if "loads" in top else None
    cluster = check.cluster(top["cluster"], "cluster") if "cluster" in top else None
    out_dir = (base / check.text(top["out"], "out")).resolve() if "out" in top else None
    options = check.mapping(top.get("options") or {}, "options", OPTION_KEYS)

    round_s = (check.positive_float(options["round_s"], "options.round_s")
               if options.get("round_s") is not None else None)
    mechanism = check.choice(options.get("mechanism", "schedlab"), "options.mechanism",
                             MECHANISMS)
    fmt = check.choice(options.get("format", "auto"), "options.format", FORMATS)
    workers = check.positive_int(options.get("workers", 1), "options.workers")
    backend = check.choice(options.get("backend", "local"), "options.backend", BACKENDS)
    address = (check.text(options["address"], "options.address")
               if options.get("address") is not None else None)
    unfair = (check.positive_float(options["unfair_threshold"], "options.unfair_threshold")
              if options.get("unfair_threshold") is not None else None)

    raw = top["workloads"]
    if not isinstance(raw, list) or not raw:
        raise check.fail("workloads", "expected a non-empty list of workloads")
    workloads: list[SweepWorkload] = []
    for i, entry in enumerate(raw):
        workloads.append(_workload(check, entry, f"workloads[{i}]", base, loads, cluster))
    names = [w.name for w in workloads]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise check.fail(f"workloads[{i}].name", f"{name!r} is used twice; give each "
                             "workload its own name")
    specs = [w.spec for w in workloads]
    for i, spec in enumerate(specs):
        if specs.index(spec) != i:
            raise check.fail(f"workloads[{i}]", f"the same workload as "
                             f"workloads[{specs.index(spec)}]")
    return SweepConfig(path=source, policies=policies, workloads=tuple(workloads),
                       seeds=seeds, out_dir=out_dir, round_s=round_s, mechanism=mechanism,
                       fmt=cast(ResultFormat, fmt), workers=workers,
                       backend=cast(Backend, backend), address=address,
                       unfair_threshold=unfair)


def _workload(check: _Checker, entry: Any, where: str, base: Path,
              loads: tuple[float | None, ...] | None,
              cluster: tuple[tuple[str, int], ...] | None) -> SweepWorkload:
    if isinstance(entry, str):
        entry = {"kind": entry}
    if not isinstance(entry, Mapping):
        raise check.fail(where, f"expected a mapping with a kind, got {_kind(entry)}")
    if "kind" not in entry:
        raise check.fail(f"{where}.kind", f"missing (one of {', '.join(WORKLOAD_KINDS)})")
    kind = check.choice(entry["kind"], f"{where}.kind", WORKLOAD_KINDS)
    fields = check.mapping(entry, where, COMMON_WORKLOAD_KEYS | KIND_KEYS[kind])
    default_jobs, default_cluster, default_loads = KIND_DEFAULTS[kind]
    name = check.text(fields.get("name", kind), f"{where}.name")
    jobs = (check.positive_int(fields["jobs"], f"{where}.jobs")
            if fields.get("jobs") is not None else default_jobs)
    pools = (check.cluster(fields["cluster"], f"{where}.cluster") if "cluster" in fields
             else cluster if cluster is not None
             else None if default_cluster is None
             else tuple(parse_cluster_spec(default_cluster).items()))
    rates = (check.loads(fields["loads"], f"{where}.loads") if "loads" in fields
             else loads if loads is not None else default_loads)

    if kind in ("gavel", "shockwave", "titan", "hare"):
        assert pools is not None
        multi_gpu = check.flag(fields.get("multi_gpu", True), f"{where}.multi_gpu")
        # shockwave: the throughput table, shockwave-tacc as `schedlab simulate`
        throughputs = (check.choice(fields.get("throughputs", SHOCKWAVE_THROUGHPUTS),
                                    f"{where}.throughputs", tuple(THROUGHPUT_SOURCES))
                       if kind == "shockwave" else None)
        spec = WorkloadSpec(kind=cast(Any, kind), num_jobs=jobs, cluster=pools,
                            multi_gpu=multi_gpu, throughputs=throughputs)
    elif kind == "trace":
        if "path" not in fields:
            raise check.fail(f"{where}.path", "missing: a trace workload needs its file")
        if "format" not in fields:
            raise check.fail(f"{where}.format", f"missing (one of {', '.join(TRACE_FORMATS)})")
        trace = (base / check.text(fields["path"], f"{where}.path")).resolve()
        if not trace.exists():
            raise check.fail(f"{where}.path", f"no such file or folder: {trace}")
        assert pools is not None
        spec = WorkloadSpec(kind="trace", num_jobs=jobs, cluster=pools, trace_path=str(trace),
                            trace_format=check.choice(fields["format"], f"{where}.format",
                                                      TRACE_FORMATS),
                            keep_failed=check.flag(fields.get("keep_failed", False),
                                                   f"{where}.keep_failed"))
    else:
        spec = _instance_spec(check, fields, where, base, jobs, pools, rates)
    return SweepWorkload(name=name, spec=spec, loads=rates)


def _instance_spec(check: _Checker, fields: Mapping[str, Any], where: str, base: Path,
                   jobs: int | None, pools: tuple[tuple[str, int], ...] | None,
                   rates: tuple[float | None, ...]) -> WorkloadSpec:
    """An instance file's workload; the file is read and checked now."""
    from schedlab.workloads.instance_jobs import (
        InstanceFile,
        file_digest,
        workload_from_instance_file,
    )

    if "path" not in fields:
        raise check.fail(f"{where}.path", "missing: an instance workload needs its file")
    path = (base / check.text(fields["path"], f"{where}.path")).resolve()
    if not path.is_file():
        raise check.fail(f"{where}.path", f"no such file: {path}")
    static = check.flag(fields.get("static", False), f"{where}.static")
    if static and any(rate is not None for rate in rates):
        raise check.fail(f"{where}.static", "a static workload has no rate: give loads: "
                         "[null] or drop static")
    try:
        instance = workload_from_instance_file(path, num_jobs=jobs,
                                               cluster=None if pools is None else dict(pools))
    except InputError as exc:
        raise check.fail(where, str(exc)) from None
    own = tuple((acc, pool.count) for acc, pool in instance.cluster.accelerators.items())
    recipe = InstanceFile(path=str(path), digest=file_digest(path), cluster=pools,
                          static=static)
    return WorkloadSpec(kind="instance", num_jobs=jobs, cluster=own, instance_file=recipe)


__all__ = [
    "BACKENDS",
    "KIND_DEFAULTS",
    "WORKLOAD_KINDS",
    "Backend",
    "SweepConfig",
    "SweepWorkload",
    "load_sweep_config",
    "sweep_config_from_dict",
]
