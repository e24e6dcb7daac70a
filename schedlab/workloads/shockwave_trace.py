"""Shockwave's ``.trace`` text format: write it from an Instance, read it into one.

A Shockwave trace (``scheduler/traces/`` in github.com/uw-mad-dash/shockwave) has one job per
line, 12 tab-separated fields, as ``scripts/utils/generate_trace.py`` writes them
(``"%s\\t%d\\n" % (str(job), arrival_time)`` with ``Job.__str__`` of ``scheduler/job.py``):

====  ===================  ==========  ====================================================
 #    field                format      value
====  ===================  ==========  ====================================================
 1    job_type             ``%s``      ``<model> (batch size <b0>)``
 2    command              ``%s``      the job table's command, ``%s`` for the data folder
 3    working_directory    ``%s``      the job table's
 4    num_steps_arg        ``%s``      the job table's
 5    needs_data_dir       ``%d``      1
 6    total_steps          ``%d``      int(duration x T[b0, s, v100]), whole steps
 7    scale_factor         ``%d``      GPUs s
 8    mode                 ``%s``      static, accordion or gns
 9    priority_weight      ``%d``      1
 10   SLO                  ``%f``      -1.000000 (none)
 11   duration             ``%d``      run time on s V100s at b0, s
 12   arrival_time         ``%d``      s, the cumulative time truncated
====  ===================  ==========  ====================================================

:func:`format_shockwave_trace` writes an instance made by
:func:`~schedlab.workloads.shockwave.generate_shockwave_instance` in this format; with
``throughputs="shockwave-tacc"`` and seed 25 it is Shockwave's published
``120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace`` byte for byte.
An instance has no duration field: the duration written is the smallest whole second d with
int(d x T) = total_steps, T the job's V100 throughput (the generator's own rule run backwards;
unique whenever T > 1 step/s, true of every Shockwave job type on both shipped tables).

:func:`read_shockwave_trace` turns such a file into an Instance with the generator's fields
(epochs, batch schedules, seconds per epoch) from a throughput table; the trace's
``total_steps``, scale factor, mode, priority weight and arrival are kept as written.  A bad
row raises :class:`~schedlab.errors.InputError` naming the file, the line and the field.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from schedlab.atomic import write_bytes_atomic
from schedlab.documents import MAX_FILE_BYTES, read_text
from schedlab.errors import InputError
from schedlab.instance import (
    INSTANCE_SCHEMA,
    MAX_JOBS,
    Instance,
    instance_from_dict,
)
from schedlab.workloads.shockwave import (
    REFERENCE_ACCELERATOR,
    SHOCKWAVE_CLUSTER,
    SHOCKWAVE_ROUND_S,
    SHOCKWAVE_WINDOW_ROUNDS,
    _cluster_document,
    _job_document,
    _substitution_notes,
    _Throughputs,
    describe_throughputs,
)
from schedlab.workloads.shockwave_adaptation import ADAPTATIONS, INITIAL_BATCH_SIZES, MODELS
from schedlab.workloads.throughput_files import resolve_throughputs
from schedlab.workloads.throughputs import ThroughputTable

log = logging.getLogger(__name__)

#: The 12 fields of a trace line, in order (the names of Shockwave's ``parse_trace``).
TRACE_COLUMNS: tuple[str, ...] = (
    "job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
    "total_steps", "scale_factor", "mode", "priority_weight", "SLO", "duration",
    "arrival_time")
#: Throughput source of a trace read without one: the table Shockwave's traces were made with.
DEFAULT_TRACE_THROUGHPUTS = "shockwave-tacc"

#: Per model family (``scheduler/job_table.py``): (command with ``{batch_size}``, working
#: directory, num_steps_arg).  Every Shockwave job needs a data folder (``%s``).
JOB_COMMANDS: Mapping[str, tuple[str, str, str]] = {
    "ResNet-18": ("python3 main.py --data_dir=%s/cifar10 --batch_size {batch_size}",
                  "image_classification/cifar10", "--num_steps"),
    "ResNet-50": ("python3 main.py -j 4 -a resnet50 -b {batch_size} %s/imagenet/",
                  "image_classification/imagenet", "--num_minibatches"),
    "Transformer": ("python3 train.py -data %s/translation/multi30k.atok.low.pt -batch_size "
                    "{batch_size} -proj_share_weight", "translation", "-step"),
    "LM": ("python3 main.py --cuda --data %s/wikitext2 --batch_size {batch_size}",
           "language_modeling", "--steps"),
    "Recommendation": ("python3 train.py --data_dir %s/ml-20m/pro_sg/ --batch_size "
                       "{batch_size}", "recommendation", "-n"),
}

_JOB_TYPE_RE = re.compile(r"^(?P<model>.*) \(batch size (?P<batch>\d+)\)$")


def _model_and_batch(job_type: str | None) -> tuple[str, int] | None:
    match = _JOB_TYPE_RE.match(job_type or "")
    if match is None:
        return None
    return match.group("model"), int(match.group("batch"))


# --------------------------------------------------------------------------------- write


def run_time_s(total_steps: int, throughput: float) -> int:
    """The duration d (whole s) the generator drew: the smallest d >= 1 with
    int(d x throughput) = total_steps, searched next to ceil(total_steps / throughput)
    (that value itself when no neighbour fits: a total_steps the generator did not make)."""
    guess = max(1, math.ceil(total_steps / throughput))
    for d in (guess - 1, guess, guess + 1):
        if d >= 1 and int(d * throughput) == total_steps:
            return d
    return guess


def format_shockwave_trace(instance: Instance) -> str:
    """The instance's jobs as Shockwave trace lines, in job order (module docstring).

    Each job needs a Shockwave ``job_type`` (``<model> (batch size <b>)`` of a model of
    :data:`JOB_COMMANDS`), ``total_steps`` and a V100 ``throughput``; anything else raises
    :class:`~schedlab.errors.InputError` naming ``jobs[i]`` and the field.  The weight is
    written with ``%d`` as Shockwave does; an SLO has no place (Shockwave's is a factor, not
    seconds) and is refused.
    """
    lines: list[str] = []
    for i, job in enumerate(instance.jobs):
        where = f"jobs[{i}]"
        parsed = _model_and_batch(job.job_type)
        if parsed is None or parsed[0] not in JOB_COMMANDS:
            raise InputError(f"not a Shockwave job type: {job.job_type!r} (models: "
                             f"{', '.join(JOB_COMMANDS)})", file=instance.name,
                             field=f"{where}.job_type")
        model, batch = parsed
        if job.total_steps is None:
            raise InputError("a trace line needs total_steps", file=instance.name,
                             field=f"{where}.total_steps")
        throughput = job.throughput.get(REFERENCE_ACCELERATOR, 0.0)
        if throughput <= 0:
            raise InputError(f"a trace line needs the {REFERENCE_ACCELERATOR} throughput > 0 "
                             "(the duration is the run time on V100s)", file=instance.name,
                             field=f"{where}.throughput.{REFERENCE_ACCELERATOR}")
        if job.slo_s is not None:
            raise InputError("Shockwave's trace has no SLO in seconds", file=instance.name,
                             field=f"{where}.slo_s")
        command, folder, steps_arg = JOB_COMMANDS[model]
        total_steps = int(job.total_steps)
        # Shockwave's %d truncates a float towards zero: int(); %f of -1 is -1.000000
        fields = (str(job.job_type), command.format(batch_size=batch), folder, steps_arg, "1",
                  str(total_steps), str(job.scale_factor), job.adaptation or "static",
                  str(int(job.weight)), f"{-1:f}", str(run_time_s(total_steps, throughput)),
                  str(int(job.arrival)))
        lines.append("\t".join(fields) + "\n")
    return "".join(lines)


def write_shockwave_trace(instance: Instance, path: str | Path) -> None:
    """Write :func:`format_shockwave_trace` of ``instance`` to ``path``, atomically."""
    write_bytes_atomic(Path(path), format_shockwave_trace(instance).encode("utf-8"))


# ---------------------------------------------------------------------------------- read


def _whole(text: str, field: str, lowest: int, file: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"expected an integer, got {text!r}", file=file, field=field) from None
    if value < lowest:
        raise InputError(f"must be >= {lowest}, got {value}", file=file, field=field)
    return value


def _number(text: str, field: str, file: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"expected a number, got {text!r}", file=file, field=field) from None
    if not math.isfinite(value):
        raise InputError(f"expected a finite number, got {text!r}", file=file, field=field)
    return value


def _read_row(fields: list[str], line: int, file: str) -> dict[str, Any]:
    """One trace line's fields, checked: model, b0, total_steps, scale_factor, mode, weight,
    duration, arrival."""
    where = f"line {line}"
    if len(fields) != len(TRACE_COLUMNS):
        raise InputError(f"{len(fields)} tab-separated fields, expected {len(TRACE_COLUMNS)} "
                         f"({', '.join(TRACE_COLUMNS)})", file=file, field=where)
    row = dict(zip(TRACE_COLUMNS, fields, strict=True))
    parsed = _model_and_batch(row["job_type"])
    if parsed is None:
        raise InputError(f"expected '<model> (batch size <b>)', got {row['job_type']!r}",
                         file=file, field=f"{where}: job_type")
    model, batch = parsed
    if model not in MODELS:
        raise InputError(f"unknown model {model!r} (known: {', '.join(MODELS)})", file=file,
                         field=f"{where}: job_type")
    if batch not in INITIAL_BATCH_SIZES[model]:
        raise InputError(f"{model} starts at batch size "
                         f"{', '.join(map(str, INITIAL_BATCH_SIZES[model]))} in Shockwave's "
                         f"job table, not {batch}", file=file, field=f"{where}: job_type")
    if row["mode"] not in ADAPTATIONS:
        raise InputError(f"unknown mode {row['mode']!r} (known: {', '.join(ADAPTATIONS)})",
                         file=file, field=f"{where}: mode")
    weight = _number(row["priority_weight"], f"{where}: priority_weight", file)
    if weight <= 0:
        raise InputError(f"must be > 0, got {weight:g}", file=file,
                         field=f"{where}: priority_weight")
    _number(row["SLO"], f"{where}: SLO", file)
    arrival = _number(row["arrival_time"], f"{where}: arrival_time", file)
    if arrival < 0:
        raise InputError(f"must be >= 0, got {arrival:g}", file=file,
                         field=f"{where}: arrival_time")
    return {
        "model": model, "b0": batch, "mode": row["mode"], "weight": weight,
        "arrival": arrival,
        "total_steps": _whole(row["total_steps"], f"{where}: total_steps", 1, file),
        "scale_factor": _whole(row["scale_factor"], f"{where}: scale_factor", 1, file),
        "duration": _whole(row["duration"], f"{where}: duration", 1, file),
    }


def read_shockwave_trace(
    path: str | Path,
    cluster: Mapping[str, int] | None = None,
    *,
    throughputs: str | ThroughputTable = DEFAULT_TRACE_THROUGHPUTS,
    num_jobs: int | None = None,
    round_s: float = SHOCKWAVE_ROUND_S,
    window_rounds: int = SHOCKWAVE_WINDOW_ROUNDS,
) -> Instance:
    """A Shockwave ``.trace`` file as an Instance on ``cluster`` (default 32 V100s).

    Job i ("0", "1", ... in file order; the first ``num_jobs`` lines, blank lines skipped)
    keeps the line's job type, ``total_steps``, scale factor, mode (``adaptation``), priority
    weight (``weight``) and arrival; epochs, batch schedule, seconds per epoch and
    ``throughput`` follow :func:`~schedlab.workloads.shockwave.generate_shockwave_instance`
    with ``throughputs`` (default ``shockwave-tacc``, the table of Shockwave's traces; a
    name, a file or a table).  The SLO column is read and ignored.  A bad line, or a job type
    the table lacks, raises :class:`~schedlab.errors.InputError` naming the file, the line
    and the field (or the table's file and the job type).
    """
    file = str(path)
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", file=file)
    if p.stat().st_size > MAX_FILE_BYTES:
        raise InputError(f"larger than {MAX_FILE_BYTES} bytes", file=file)
    if num_jobs is not None and num_jobs < 1:
        raise InputError(f"must be >= 1, got {num_jobs}", field="num_jobs")
    table = resolve_throughputs(throughputs)
    pools = dict(SHOCKWAVE_CLUSTER if cluster is None else cluster)
    cluster_doc = _cluster_document(pools, table)
    text = read_text(p)
    rates = _Throughputs(table, {})
    jobs: list[dict[str, Any]] = []
    differ = 0
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if num_jobs is not None and len(jobs) >= num_jobs:
            break
        if len(jobs) >= MAX_JOBS:
            raise InputError(f"more than {MAX_JOBS} jobs", file=file, field=f"line {line}")
        row = _read_row(raw.split("\t"), line, file)
        needed_by = f"line {line} of {p.name}"
        doc = _job_document(str(len(jobs)), row["model"], row["b0"], row["scale_factor"],
                            row["mode"], row["total_steps"], row["arrival"], rates,
                            list(pools), needed_by)
        if row["weight"] != 1.0:
            doc["weight"] = row["weight"]
        reference = rates.of(row["model"], row["b0"], row["scale_factor"], needed_by)
        differ += int(row["duration"] * reference[REFERENCE_ACCELERATOR]) != row["total_steps"]
        jobs.append(doc)
    if not jobs:
        raise InputError("the trace has no jobs", file=file)
    if differ:
        log.info("%s: %d of %d lines' total_steps differ from duration x the %s V100 "
                 "throughput (the trace was made with another table); the trace's steps are "
                 "kept", p.name, differ, len(jobs), table.source)
    name = p.name.removesuffix(".trace") or "shockwave-trace"
    return instance_from_dict({
        "schema": INSTANCE_SCHEMA,
        "name": name,
        "description": (
            f"{len(jobs)} jobs of Shockwave trace {p.name}: job types, steps, scale factors, "
            f"modes and arrivals as written; epochs and seconds per epoch from "
            f"{describe_throughputs(table)}, V100.") + _substitution_notes(rates),
        "cluster": cluster_doc,
        "jobs": jobs,
        "params": {"round_s": float(round_s), "window_rounds": int(window_rounds)},
    }, source=file)
