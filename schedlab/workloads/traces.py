"""Readers for public GPU-cluster traces: Microsoft Philly, SenseTime Helios, Alibaba PAI.

Each reader turns one trace file (or two, for PAI) into :class:`TraceJob` records, and
:func:`trace_jobs_to_instance` turns those into an :class:`~schedlab.instance.Instance` that
the simulator replays on a cluster you choose.  :func:`instance_from_trace` does both.

What a trace gives and what we add (docs/simulate.md has the full rationale):

- **arrival** (s) = submit time - the first kept job's submit time;
- **duration** (s): how long the job ran in the trace (format-specific, below);
- **GPUs** requested -> **scale factor** s = the smallest power of two >= GPUs, capped at
  ``max_scale_factor`` (default 8, the largest scale factor Gavel measured) and at the largest
  scale factor the cluster can run;
- **job type**: traces carry no model, so each job draws a type uniformly (seeded) among the
  Gavel job types measured at its scale factor that can run on the cluster
  (:func:`~schedlab.workloads.throughputs.load_gavel_throughputs`);
- **total_steps** = duration_s x T[type, s, v100]: the trace's run time is taken as the run time
  on s V100s (Gavel's reference accelerator), the same convention as the Gavel generator;
  ``throughput[k]`` = T[type, s, k] for every accelerator type k of the cluster.

Formats (column orders as published; a bad row raises :class:`~schedlab.errors.InputError`
naming the file, the line and the field, e.g. ``cluster_log.csv: line 7: end_time
2020-04-01 10:00:00 before start_time 2020-04-01 11:00:00``):

- **Philly** ``cluster_job_log`` (JSON list of jobs with ``jobid, user, vc, status,
  submitted_time, attempts[{start_time, end_time, detail[{ip, gpus[...]}]}]``):
  duration = the sum over attempts of end - start (the time it actually held GPUs; gaps
  between retries are queueing, which the simulator models itself); GPUs = the number of GPUs
  listed in the first attempt's ``detail`` (summed over its machines).  Status ``Pass`` is
  kept; ``Killed`` and ``Failed`` only with ``keep_failed``.  Jobs with no complete attempt
  (never scheduled, or still running when the log was taken) are skipped.
- **Helios** ``cluster_log.csv`` (header row ``job_id,user,vc,gpu_num,cpu_num,node_num,state,
  submit_time,start_time,end_time,duration,queue``; the public release has no job names;
  times are ``YYYY-MM-DD HH:MM:SS``): duration = ``duration`` (s), or end - start when it is
  empty; GPUs = ``gpu_num``; CPU-only jobs (gpu_num 0) are skipped.  State ``COMPLETED`` is
  kept; ``CANCELLED``, ``FAILED``, ``TIMEOUT``, ``NODE_FAIL`` ... only with ``keep_failed``.
- **Alibaba PAI** (cluster-trace-gpu-v2020), CSV files **without a header row**:
  ``pai_job_table.csv``: ``job_name, inst_id, user, status, start_time, end_time`` (start_time =
  submission, s); ``pai_task_table.csv``: ``job_name, task_name, inst_num, status, start_time,
  end_time, plan_cpu, plan_mem, plan_gpu, gpu_type`` (plan_gpu in percent of one GPU).
  GPUs = ceil(sum over the job's tasks of inst_num x plan_gpu / 100) (a fractional request
  becomes one whole GPU; CPU-only jobs are skipped); duration = last task end - first task
  start.  Status ``Terminated`` is kept; ``Failed`` only with ``keep_failed``; ``Running`` and
  ``Waiting`` never (they have no end).

A **Shockwave** ``.trace`` file (format ``shockwave``) names its own job types, steps, modes
and arrivals: :func:`instance_from_trace` hands it to
:func:`~schedlab.workloads.shockwave_trace.read_shockwave_trace` (no types are drawn; the
seed, ``keep_failed`` and ``max_scale_factor`` do not apply).

A killed or failed job kept with ``keep_failed`` is replayed as a job that needs the work it
did before it stopped.  Wall-clock times without a time zone are read as UTC: only differences
matter, and a daylight-saving change inside a job shifts its duration by an hour at most.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from schedlab.defaults import ROUND_S
from schedlab.defaults import TRACE_FORMATS as _TRACE_FORMATS
from schedlab.documents import parse_json, read_text
from schedlab.errors import InputError
from schedlab.instance import (
    INSTANCE_SCHEMA,
    MAX_JOBS,
    Instance,
    instance_from_dict,
)
from schedlab.workloads.precision import whole_steps
from schedlab.workloads.throughput_files import resolve_throughputs
from schedlab.workloads.throughputs import ThroughputTable, load_gavel_throughputs

log = logging.getLogger(__name__)

TraceFormat = Literal["philly", "helios", "pai", "shockwave"]
#: The formats :func:`instance_from_trace` reads.
TRACE_FORMATS: tuple[str, ...] = _TRACE_FORMATS

#: Default cap on the scale factor (GPUs per job): Gavel measured 1, 2, 4 and 8.
DEFAULT_MAX_SCALE_FACTOR = 8
#: Durations are taken as run times on this accelerator type (Gavel's reference).
REFERENCE_ACCELERATOR = "v100"
#: Round length written into the instance's params, s (Gavel's).
DEFAULT_ROUND_S = ROUND_S
#: Default cluster: the Gavel paper's 36 V100 + 36 P100 + 36 K80.
DEFAULT_CLUSTER: Mapping[str, int] = {"v100": 36, "p100": 36, "k80": 36}

#: Column order of the header-less PAI files (cluster-trace-gpu-v2020/data/*.header).
PAI_JOB_COLUMNS: tuple[str, ...] = ("job_name", "inst_id", "user", "status", "start_time",
                                    "end_time")
PAI_TASK_COLUMNS: tuple[str, ...] = ("job_name", "task_name", "inst_num", "status",
                                     "start_time", "end_time", "plan_cpu", "plan_mem",
                                     "plan_gpu", "gpu_type")
#: Columns of Helios' cluster_log.csv that the reader needs (others are ignored).
HELIOS_REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "gpu_num", "state", "submit_time")

PHILLY_OK = frozenset({"pass"})
PHILLY_FAILED = frozenset({"killed", "failed"})
HELIOS_OK = frozenset({"completed"})
PAI_OK = frozenset({"terminated"})
PAI_FAILED = frozenset({"failed"})
#: Naive wall-clock times are read as UTC: seconds since this instant.
_EPOCH = datetime(1970, 1, 1)
_fromisoformat = datetime.fromisoformat


@dataclass(frozen=True)
class TraceJob:
    """One job as a trace records it, before it becomes an Instance job.

    ``submit_s`` is in the trace's own clock (seconds); ``duration_s`` is how long it ran;
    ``gpus`` is what it asked for; ``where`` says where it came from (for messages).
    """

    id: str
    submit_s: float
    duration_s: float
    gpus: int
    status: str
    user: str | None = None
    where: str = ""


class _Skips:
    """Counts of skipped jobs by reason, logged once at the end of a read."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.counts: Counter[str] = Counter()

    def add(self, reason: str) -> None:
        self.counts[reason] += 1

    def report(self, kept: int) -> None:
        if self.counts:
            detail = ", ".join(f"{n} {reason}" for reason, n in self.counts.most_common())
            log.info("%s: kept %d jobs; skipped %s", self.source, kept, detail)

    def describe(self) -> str:
        if not self.counts:
            return "the file has no jobs"
        detail = ", ".join(f"{n} {reason}" for reason, n in self.counts.most_common())
        return f"every job was skipped ({detail})"


# ------------------------------------------------------------------------------ parsing


def _parse_time(value: Any, *, file: str, where: str, field: str) -> float:
    """Seconds from a number (seconds) or a wall-clock string ``YYYY-MM-DD HH:MM:SS``.

    A string without a time zone is read as UTC.
    """
    if isinstance(value, bool):
        raise InputError(f"{field} must be a time, got {value!r}", file=file, field=where)
    if isinstance(value, int | float):
        number = float(value)
    else:
        text = str(value).strip()
        if len(text) >= 10 and text[4] == "-":  # a wall-clock time (the common case first)
            try:
                stamp = datetime.fromisoformat(text)
            except ValueError:
                raise InputError(
                    f"{field} {text!r} is neither seconds nor a 'YYYY-MM-DD HH:MM:SS' time",
                    file=file, field=where,
                ) from None
            if stamp.tzinfo is None:
                return (stamp - _EPOCH).total_seconds()
            return stamp.timestamp()
        try:
            number = float(text)
        except ValueError:
            raise InputError(
                f"{field} {text!r} is neither seconds nor a 'YYYY-MM-DD HH:MM:SS' time",
                file=file, field=where,
            ) from None
    if not math.isfinite(number):
        raise InputError(f"{field} must be finite, got {value!r}", file=file, field=where)
    return number


def _time_field(text: Any, *, file: str, where: str, field: str) -> float:
    """:func:`_parse_time` of a CSV field or JSON value, with the common case first: a naive
    ``YYYY-MM-DD HH:MM:SS`` parsed in one call (at 10^6 rows, the reader's main cost).  Any
    other text (seconds, a time zone, surrounding blanks, an error) goes to
    :func:`_parse_time`, so both give the same value and the same message."""
    if type(text) is str and text[4:5] == "-" and len(text) >= 10:
        try:
            stamp = _fromisoformat(text)
        except ValueError:  # not this form: the general parser reads it or names the error
            return _parse_time(text, file=file, where=where, field=field)
        if stamp.tzinfo is None:
            return (stamp - _EPOCH).total_seconds()
    return _parse_time(text, file=file, where=where, field=field)


def _parse_number(value: Any, *, file: str, where: str, field: str) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise InputError(f"{field} {value!r} is not a number", file=file, field=where) from None
    if not math.isfinite(number) or number < 0:
        raise InputError(f"{field} must be a number >= 0, got {value!r}", file=file, field=where)
    return number


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() in ("", "None", "NaN",
                                                                          "nan", "null"))


def _csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every non-empty CSV record."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    try:
        for fields in reader:
            if not fields or (not fields[0].strip() and all(not f.strip() for f in fields)):
                continue  # a blank line, or one of empty fields
            yield reader.line_num, fields
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", file=str(path),
                         field=f"line {reader.line_num}") from None


def _check_span(start: float, end: float, *, file: str, where: str, start_field: str,
                end_field: str, start_text: Any, end_text: Any) -> None:
    if end < start:
        raise InputError(f"{end_field} {_show(end_text)} before {start_field} {_show(start_text)}",
                         file=file, field=where)


def _show(value: Any) -> str:
    return str(value).strip() if isinstance(value, str) else repr(value)


# ------------------------------------------------------------------------------- Philly


def read_philly_jobs(path: str | Path, *, keep_failed: bool = False) -> list[TraceJob]:
    """Jobs of a Philly ``cluster_job_log`` (JSON list; ``.gz`` accepted).

    duration_s = sum over complete attempts of (end_time - start_time); gpus = GPUs listed in
    the first attempt's ``detail``; submit_s = ``submitted_time``.  See the module docstring
    for which jobs are kept.
    """
    p = Path(path)
    source = p.name
    text = read_text(p)
    if not text.strip():
        raise InputError("file is empty: a Philly job log is a JSON list of jobs", file=str(p))
    doc = parse_json(text, str(p))
    if isinstance(doc, dict) and isinstance(doc.get("jobs"), list):
        doc = doc["jobs"]
    if not isinstance(doc, list):
        raise InputError("a Philly job log is a JSON list of job objects", file=str(p))
    if len(doc) > MAX_JOBS:
        raise InputError(f"{len(doc)} jobs exceed the limit {MAX_JOBS}", file=str(p))
    skips = _Skips(source)
    jobs: list[TraceJob] = []
    for i, raw in enumerate(doc):
        try:
            job = _philly_job(raw, i, str(p), skips, keep_failed=keep_failed)
        except InputError as exc:
            line = _json_job_line(text, i, raw)
            if line is None:
                raise
            raise InputError(exc.reason, file=exc.file,
                             field=f"line {line}: {exc.field}" if exc.field else f"line {line}"
                             ) from None
        if job is not None:
            jobs.append(job)
    skips.report(len(jobs))
    if not jobs:
        raise InputError(f"no usable jobs: {skips.describe()}", file=str(p))
    return jobs


def _philly_job(raw: Any, i: int, file: str, skips: _Skips, *,
                keep_failed: bool) -> TraceJob | None:
    if not isinstance(raw, dict):
        raise InputError(f"a job must be an object, got {type(raw).__name__}", file=file,
                         field=f"[{i}]")
    jobid = raw.get("jobid")
    if _blank(jobid):
        raise InputError("missing 'jobid'", file=file, field=f"[{i}]")
    where = f"[{i}] (jobid {jobid})"
    status = str(raw.get("status", "")).strip()
    if status.lower() in PHILLY_FAILED:
        if not keep_failed:
            skips.add(f"{status.lower()} (keep_failed=False)")
            return None
    elif status.lower() not in PHILLY_OK:
        skips.add(f"status {status or 'missing'!r}")
        return None
    if _blank(raw.get("submitted_time")):
        raise InputError("missing 'submitted_time'", file=file, field=where)
    submit = _time_field(raw["submitted_time"], file=file, where=f"{where}.submitted_time",
                         field="submitted_time")
    attempts = raw.get("attempts")
    if attempts is None:
        attempts = []
    if not isinstance(attempts, list):
        raise InputError("'attempts' must be a list", file=file, field=where)
    duration = 0.0
    complete = 0
    first_gpus: int | None = None
    for a, attempt in enumerate(attempts):
        at = f"{where}.attempts[{a}]"
        if not isinstance(attempt, dict):
            raise InputError("an attempt must be an object", file=file, field=at)
        if first_gpus is None:
            first_gpus = _philly_gpus(attempt.get("detail"), file=file, where=f"{at}.detail")
        start_raw, end_raw = attempt.get("start_time"), attempt.get("end_time")
        if _blank(start_raw) or _blank(end_raw):
            continue  # the log lost this attempt's times (or it is still running)
        start = _time_field(start_raw, file=file, where=f"{at}.start_time", field="start_time")
        end = _time_field(end_raw, file=file, where=f"{at}.end_time", field="end_time")
        _check_span(start, end, file=file, where=at, start_field="start_time",
                    end_field="end_time", start_text=start_raw, end_text=end_raw)
        if start < submit:
            raise InputError(f"start_time {_show(start_raw)} before submitted_time "
                             f"{_show(raw['submitted_time'])}", file=file, field=at)
        duration += end - start
        complete += 1
    if attempts and _blank(attempts[-1].get("end_time")) and not _blank(
            attempts[-1].get("start_time")):
        skips.add("still running when the log was taken")
        return None
    if complete == 0:
        skips.add("without a complete attempt")
        return None
    if not first_gpus:
        skips.add("without GPUs")
        return None
    if duration <= 0:
        skips.add("of zero duration")
        return None
    user = raw.get("user")
    return TraceJob(id=str(jobid), submit_s=submit, duration_s=duration, gpus=first_gpus,
                    status=status, user=None if _blank(user) else str(user), where=where)


def _json_job_line(text: str, i: int, raw: Any) -> int | None:
    """The line of job ``i``'s (``raw``'s) ``jobid`` in a Philly log, for an error message;
    None when the file is one line (its index says where) or the line cannot be told for sure.

    The job is taken to be the (i+1)-th ``"jobid"`` key of the text, which holds when every
    job has one; the line is named only when that key's value is the job's own jobid."""
    if "\n" not in text.strip() or not isinstance(raw, dict) or not isinstance(
            raw.get("jobid"), str | int):
        return None
    position = -1
    for _ in range(i + 1):
        position = text.find('"jobid"', position + 1)
        if position < 0:
            return None
    after = text[position + len('"jobid"'):position + len('"jobid"') + 400].lstrip()
    if not after.startswith(":"):
        return None
    value = after[1:].lstrip()
    for written in {json.dumps(raw["jobid"]), json.dumps(raw["jobid"], ensure_ascii=False)}:
        if value.startswith(written) and value[len(written):].lstrip()[:1] in (",", "}"):
            return text.count("\n", 0, position) + 1
    return None


def _philly_gpus(detail: Any, *, file: str, where: str) -> int:
    if detail is None:
        return 0
    if not isinstance(detail, list):
        raise InputError("'detail' must be a list of {ip, gpus}", file=file, field=where)
    total = 0
    for m, machine in enumerate(detail):
        gpus = machine.get("gpus") if isinstance(machine, dict) else None
        if not isinstance(gpus, list):
            raise InputError("'gpus' must be a list of GPU names", file=file,
                             field=f"{where}[{m}].gpus")
        total += len(gpus)
    return total


# ------------------------------------------------------------------------------- Helios


def read_helios_jobs(path: str | Path, *, keep_failed: bool = False) -> list[TraceJob]:
    """Jobs of a Helios ``cluster_log.csv`` (header row required; ``.gz`` accepted).

    duration_s = ``duration`` (or end_time - start_time when empty); gpus = ``gpu_num``;
    submit_s = ``submit_time``.  Columns are found by name, so extra or reordered columns
    (e.g. a ``jobname`` column) are fine.
    """
    p = Path(path)
    file = str(p)
    rows = _csv_rows(p)
    try:
        _, header = next(rows)
    except StopIteration:
        raise InputError("file is empty: expected a header row "
                         f"({','.join(HELIOS_REQUIRED_COLUMNS)}, ...)", file=file) from None
    names = [h.strip().lower() for h in header]
    missing = [c for c in HELIOS_REQUIRED_COLUMNS if c not in names]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)} in the header row "
                         f"(found {', '.join(names)})", file=file, field="line 1")
    columns = _HeliosColumns.of(names)
    width = len(names)
    skips = _Skips(p.name)
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    for line, fields in rows:
        if len(fields) != width:
            raise InputError(f"{len(fields)} fields, the header has {width}", file=file,
                             field=f"line {line}")
        if len(jobs) >= MAX_JOBS:
            raise InputError(f"more than {MAX_JOBS} jobs", file=file, field=f"line {line}")
        job = _helios_job(fields, columns, file=file, line=line, skips=skips,
                          keep_failed=keep_failed)
        if job is None:
            continue
        if job.id in seen:
            raise InputError(f"duplicate job_id {job.id!r} (also line {seen[job.id]})",
                             file=file, field=f"line {line}")
        seen[job.id] = line
        jobs.append(job)
    skips.report(len(jobs))
    if not jobs:
        raise InputError(f"no usable jobs: {skips.describe()}", file=file)
    return jobs


@dataclass(frozen=True)
class _HeliosColumns:
    """Where each column the reader uses sits in a row (None: the file has no such column)."""

    job_id: int
    gpu_num: int
    state: int
    submit_time: int
    start_time: int | None
    end_time: int | None
    duration: int | None
    user: int | None

    @classmethod
    def of(cls, names: list[str]) -> _HeliosColumns:
        position = {name: k for k, name in enumerate(names)}  # a repeated name: the last one
        return cls(*(position[c] for c in HELIOS_REQUIRED_COLUMNS),
                   *(position.get(c) for c in ("start_time", "end_time", "duration", "user")))


def _helios_job(fields: list[str], columns: _HeliosColumns, *, file: str, line: int,
                skips: _Skips, keep_failed: bool) -> TraceJob | None:
    """One row of cluster_log.csv as a TraceJob, or None when it is skipped (counted)."""
    where = f"line {line}"
    job_id = fields[columns.job_id].strip()
    if not job_id:
        raise InputError("empty job_id", file=file, field=where)
    gpu_text = fields[columns.gpu_num]
    gpus_value = _parse_number(gpu_text, file=file, where=where, field="gpu_num")
    if gpus_value != int(gpus_value):
        raise InputError(f"gpu_num must be a whole number, got {gpu_text!r}", file=file,
                         field=where)
    state = fields[columns.state].strip()
    if state.lower() not in HELIOS_OK and not keep_failed:
        skips.add(f"{state.lower() or 'without state'} (keep_failed=False)")
        return None
    submit_text = fields[columns.submit_time]
    submit = _time_field(submit_text, file=file, where=where, field="submit_time")
    start_text = "" if columns.start_time is None else fields[columns.start_time]
    end_text = "" if columns.end_time is None else fields[columns.end_time]
    start = end = None
    if not _blank(start_text):
        start = _time_field(start_text, file=file, where=where, field="start_time")
    if not _blank(end_text):
        end = _time_field(end_text, file=file, where=where, field="end_time")
    if start is not None and end is not None:
        _check_span(start, end, file=file, where=where, start_field="start_time",
                    end_field="end_time", start_text=start_text, end_text=end_text)
    if start is not None and start < submit:
        raise InputError(f"start_time {_show(start_text)} before submit_time "
                         f"{_show(submit_text)}", file=file, field=where)
    duration_text = None if columns.duration is None else fields[columns.duration]
    if not _blank(duration_text):
        duration = _parse_number(duration_text, file=file, where=where, field="duration")
    elif start is not None and end is not None:
        duration = end - start
    else:
        skips.add("without a duration or start/end times")
        return None
    if gpus_value == 0:
        skips.add("CPU-only")
        return None
    if duration <= 0:
        skips.add("of zero duration")
        return None
    user = None if columns.user is None else fields[columns.user]
    return TraceJob(id=job_id, submit_s=submit, duration_s=duration, gpus=int(gpus_value),
                    status=state, user=None if _blank(user) else str(user).strip(), where=where)


# ---------------------------------------------------------------------------------- PAI


def _pai_paths(job_table: Path, task_table: Path | None) -> tuple[Path, Path]:
    if job_table.is_dir():
        folder = job_table
        job_table = folder / "pai_job_table.csv"
        task_table = task_table or folder / "pai_task_table.csv"
    if task_table is None:
        task_table = job_table.with_name("pai_task_table.csv")
        if not task_table.exists():
            raise InputError(
                "the PAI reader also needs the task table (GPUs per job); expected it at "
                f"{task_table} (pass task_table=... or put it beside the job table)",
                file=str(job_table),
            )
    return job_table, task_table


def _pai_rows(path: Path, columns: Sequence[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """(where, row) for each record of a header-less PAI CSV; a header row is skipped."""
    first = True
    for line, fields in _csv_rows(path):
        if first and fields and fields[0].strip() == columns[0]:
            first = False
            continue  # a header row added by hand
        first = False
        where = f"line {line}"
        if len(fields) != len(columns):
            raise InputError(f"{len(fields)} fields, expected {len(columns)} "
                             f"({','.join(columns)}; the public files have no header row)",
                             file=str(path), field=where)
        yield where, dict(zip(columns, fields, strict=True))


def read_pai_jobs(job_table: str | Path, task_table: str | Path | None = None, *,
                  keep_failed: bool = False) -> list[TraceJob]:
    """Jobs of Alibaba PAI's ``pai_job_table.csv`` + ``pai_task_table.csv`` (no header rows).

    ``job_table`` may be the folder holding both files; ``task_table`` defaults to
    ``pai_task_table.csv`` beside the job table.  submit_s = the job's ``start_time`` (its
    submission); gpus = ceil(sum_tasks inst_num x plan_gpu / 100); duration_s = max task
    end_time - min task start_time.
    """
    job_path, task_path = _pai_paths(Path(job_table), Path(task_table) if task_table else None)
    job_file, task_file = str(job_path), str(task_path)
    # Tasks first: GPUs and the run span of each job.
    gpu_percent: dict[str, float] = {}
    span: dict[str, tuple[float, float]] = {}
    unfinished: set[str] = set()
    for where, row in _pai_rows(task_path, PAI_TASK_COLUMNS):
        name = row["job_name"].strip()
        if not name:
            raise InputError("empty job_name", file=task_file, field=where)
        inst = 1.0 if _blank(row["inst_num"]) else _parse_number(
            row["inst_num"], file=task_file, where=where, field="inst_num")
        plan = 0.0 if _blank(row["plan_gpu"]) else _parse_number(
            row["plan_gpu"], file=task_file, where=where, field="plan_gpu")
        gpu_percent[name] = gpu_percent.get(name, 0.0) + inst * plan
        if _blank(row["start_time"]) or _blank(row["end_time"]):
            unfinished.add(name)
            continue
        start = _parse_time(row["start_time"], file=task_file, where=where, field="start_time")
        end = _parse_time(row["end_time"], file=task_file, where=where, field="end_time")
        _check_span(start, end, file=task_file, where=where, start_field="start_time",
                    end_field="end_time", start_text=row["start_time"],
                    end_text=row["end_time"])
        lo, hi = span.get(name, (start, end))
        span[name] = (min(lo, start), max(hi, end))

    skips = _Skips(job_path.name)
    jobs: list[TraceJob] = []
    seen: dict[str, str] = {}
    for where, row in _pai_rows(job_path, PAI_JOB_COLUMNS):
        name = row["job_name"].strip()
        if not name:
            raise InputError("empty job_name", file=job_file, field=where)
        if name in seen:
            raise InputError(f"duplicate job_name {name!r} (also {seen[name]})", file=job_file,
                             field=where)
        seen[name] = where
        if len(jobs) >= MAX_JOBS:
            raise InputError(f"more than {MAX_JOBS} jobs", file=job_file, field=where)
        status = row["status"].strip()
        if status.lower() in PAI_FAILED:
            if not keep_failed:
                skips.add(f"{status.lower()} (keep_failed=False)")
                continue
        elif status.lower() not in PAI_OK:
            skips.add(f"{status.lower() or 'without status'} (no end)")
            continue
        if _blank(row["start_time"]):
            raise InputError("empty start_time (the submission time)", file=job_file,
                             field=where)
        submit = _parse_time(row["start_time"], file=job_file, where=where, field="start_time")
        if not _blank(row["end_time"]):
            end = _parse_time(row["end_time"], file=job_file, where=where, field="end_time")
            _check_span(submit, end, file=job_file, where=where, start_field="start_time",
                        end_field="end_time", start_text=row["start_time"],
                        end_text=row["end_time"])
        if name not in gpu_percent:
            skips.add("without task rows")
            continue
        gpus = math.ceil(gpu_percent[name] / 100.0 - 1e-9)
        if gpus <= 0:
            skips.add("CPU-only")
            continue
        if name not in span or name in unfinished:
            skips.add("with a task without start or end time")
            continue
        lo, hi = span[name]
        if hi - lo <= 0:
            skips.add("of zero duration")
            continue
        user = row["user"]
        jobs.append(TraceJob(id=name, submit_s=submit, duration_s=hi - lo, gpus=gpus,
                             status=status, user=None if _blank(user) else user.strip(),
                             where=where))
    skips.report(len(jobs))
    if not jobs:
        raise InputError(f"no usable jobs: {skips.describe()}", file=job_file)
    return jobs


# --------------------------------------------------------------------------- to Instance


def scale_factor_for(gpus: int, max_scale_factor: int = DEFAULT_MAX_SCALE_FACTOR) -> int:
    """s = min(2^ceil(log2 gpus), max_scale_factor): the next power of two, capped."""
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    power = 1
    while power < gpus:
        power *= 2
    return min(power, max_scale_factor)


def _cluster_types(cluster: Mapping[str, int], table: ThroughputTable) -> dict[str, int]:
    out: dict[str, int] = {}
    for acc, count in cluster.items():
        if acc not in table.accelerators:
            raise InputError(f"no measured throughputs for accelerator {acc!r} "
                             f"(the Gavel table has {list(table.accelerators)})",
                             field=f"cluster.{acc}")
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise InputError(f"GPU count must be a non-negative integer, got {count!r}",
                             field=f"cluster.{acc}")
        out[acc] = int(count)
    if not out or sum(out.values()) == 0:
        raise InputError("the cluster needs at least one GPU", field="cluster")
    return out


def trace_jobs_to_instance(
    jobs: Sequence[TraceJob],
    cluster: Mapping[str, int] | None = None,
    *,
    seed: int = 0,
    num_jobs: int | None = None,
    max_scale_factor: int = DEFAULT_MAX_SCALE_FACTOR,
    round_s: float = DEFAULT_ROUND_S,
    name: str = "trace",
    description: str | None = None,
    table: ThroughputTable | None = None,
    jobs_per_hour: float | None = None,
) -> Instance:
    """Turn trace jobs into a validated Instance for ``cluster`` ({type: GPUs}).

    Jobs are ordered by submit time (ties by id) and the first ``num_jobs`` kept.  Per job:
    arrival = submit_s - min submit_s (times the factor of :func:`rescale_arrivals` when
    ``jobs_per_hour`` is given: the same arrivals, without building the Instance twice);
    s = :func:`scale_factor_for` (gpus), lowered to the largest scale factor some job type can
    run at on the cluster; job type drawn uniformly from ``numpy.random.default_rng(seed)``
    among the types measured at s that can run on the cluster; total_steps = duration_s x
    T[type, s, v100] (whole steps); throughput[k] = T[type, s, k].
    """
    if num_jobs is not None and num_jobs < 1:
        raise InputError(f"num_jobs must be >= 1, got {num_jobs}")
    if max_scale_factor < 1:
        raise InputError(f"max_scale_factor must be >= 1, got {max_scale_factor}")
    if not jobs:
        raise InputError("the trace has no jobs")
    table = table or load_gavel_throughputs()
    pools = _cluster_types(DEFAULT_CLUSTER if cluster is None else cluster, table)
    ordered = sorted(jobs, key=lambda j: (j.submit_s, j.id))
    if num_jobs is not None:
        ordered = ordered[:num_jobs]

    def runnable(job_type: str, sf: int) -> bool:
        by_acc = table.throughputs[job_type][sf]
        return any(n >= sf and by_acc.get(k, 0.0) > 0 for k, n in pools.items())

    types_by_sf: dict[int, list[str]] = {}
    for job_type, sf in table.combinations():
        if REFERENCE_ACCELERATOR in table.throughputs[job_type][sf] and runnable(job_type, sf):
            types_by_sf.setdefault(sf, []).append(job_type)
    if not types_by_sf:
        raise InputError(f"no job type can run on cluster {pools}", field="cluster")
    usable = sorted(types_by_sf)

    rng = np.random.default_rng(np.random.SeedSequence(seed))
    draws = rng.random(len(ordered)).tolist()
    first = ordered[0].submit_s
    arrivals = [job.submit_s - first for job in ordered]
    if jobs_per_hour is not None:
        factor = _rate_factor(arrivals, jobs_per_hour)
        arrivals = [a * factor for a in arrivals]
    sf_of: dict[int, tuple[int, bool]] = {}  # GPUs -> (scale factor it runs at, lowered?)
    measured_of: dict[tuple[str, int], tuple[float, dict[str, float]]] = {}
    documents: list[dict[str, Any]] = []
    lowered = 0
    ids: set[str] = set()
    for i, job in enumerate(ordered):
        if job.gpus not in sf_of:
            wanted = scale_factor_for(job.gpus, max_scale_factor)
            fitting = [s for s in usable if s <= wanted]
            runs_at = fitting[-1] if fitting else usable[0]
            sf_of[job.gpus] = (runs_at, runs_at < wanted)
        sf, lower = sf_of[job.gpus]
        lowered += lower
        candidates = types_by_sf[sf]
        job_type = candidates[min(int(draws[i] * len(candidates)), len(candidates) - 1)]
        if (job_type, sf) not in measured_of:
            measured = table.throughputs[job_type][sf]
            measured_of[job_type, sf] = (measured[REFERENCE_ACCELERATOR],
                                         {k: measured[k] for k in pools if k in measured})
        reference, throughput = measured_of[job_type, sf]
        job_id = job.id if job.id not in ids else f"{job.id}#{i}"
        ids.add(job_id)
        doc: dict[str, Any] = {
            "id": job_id,
            "job_type": job_type,
            "arrival": arrivals[i],
            "scale_factor": sf,
            "total_steps": whole_steps(job.duration_s * reference),
            "throughput": throughput,  # shared: validation copies it into each Job
        }
        if job.user is not None:
            doc["user"] = job.user
        documents.append(doc)
    if lowered:
        log.info("%d of %d jobs asked for more GPUs than the cap %d or the cluster allows; "
                 "their scale factor was lowered", lowered, len(ordered), max_scale_factor)
    return instance_from_dict({
        "schema": INSTANCE_SCHEMA,
        "name": name,
        "description": description or (
            f"{len(documents)} jobs from a trace; job types drawn with seed {seed}, "
            f"max scale factor {max_scale_factor}, durations taken as V100 run times"
        ),
        "cluster": {"accelerators": {
            k: {"count": n, **({"cost_per_hour": table.prices_per_gpu_hour[k]}
                               if k in table.prices_per_gpu_hour else {})}
            for k, n in pools.items()
        }},
        "jobs": documents,
        "params": {"round_s": round_s},
    }, source=name)


def read_trace_jobs(path: str | Path, trace_format: str, *, keep_failed: bool = False,
                    task_table: str | Path | None = None) -> list[TraceJob]:
    """Dispatch to the reader of ``trace_format`` (``philly``, ``helios`` or ``pai``)."""
    if trace_format == "philly":
        return read_philly_jobs(path, keep_failed=keep_failed)
    if trace_format == "helios":
        return read_helios_jobs(path, keep_failed=keep_failed)
    if trace_format == "pai":
        return read_pai_jobs(path, task_table, keep_failed=keep_failed)
    if trace_format == "shockwave":
        raise InputError("a Shockwave trace names its own job types: read it with "
                         "instance_from_trace or read_shockwave_trace", field="trace_format")
    raise InputError(f"unknown trace format {trace_format!r} (known: {', '.join(TRACE_FORMATS)})",
                     field="trace_format")


def instance_from_trace(
    path: str | Path,
    trace_format: str,
    cluster: Mapping[str, int] | None = None,
    *,
    seed: int = 0,
    num_jobs: int | None = None,
    keep_failed: bool = False,
    max_scale_factor: int = DEFAULT_MAX_SCALE_FACTOR,
    jobs_per_hour: float | None = None,
    round_s: float | None = None,
    task_table: str | Path | None = None,
    throughputs: str | ThroughputTable | None = None,
) -> Instance:
    """Read a trace and convert it (:func:`read_trace_jobs` + :func:`trace_jobs_to_instance`;
    format ``shockwave``: :func:`~schedlab.workloads.shockwave_trace.read_shockwave_trace`).

    ``jobs_per_hour`` rescales arrivals (:func:`rescale_arrivals`) so the trace replays at
    that mean rate; None keeps the trace's own timing.  ``round_s`` None: 360 s (Gavel's), or
    120 s for a Shockwave trace.  ``throughputs`` (a name, a file or a table) replaces the
    format's table: Gavel's, or ``shockwave-tacc`` for a Shockwave trace.
    """
    if trace_format == "shockwave":
        from schedlab.workloads.shockwave import SHOCKWAVE_ROUND_S
        from schedlab.workloads.shockwave_trace import (
            DEFAULT_TRACE_THROUGHPUTS,
            read_shockwave_trace,
        )

        instance = read_shockwave_trace(
            path, cluster, throughputs=throughputs or DEFAULT_TRACE_THROUGHPUTS,
            num_jobs=num_jobs, round_s=round_s or SHOCKWAVE_ROUND_S)
        return instance if jobs_per_hour is None else rescale_arrivals(instance, jobs_per_hour)
    return _instance_from_job_trace(
        path, trace_format, cluster, seed=seed, num_jobs=num_jobs, keep_failed=keep_failed,
        max_scale_factor=max_scale_factor, round_s=round_s or DEFAULT_ROUND_S,
        task_table=task_table, throughputs=throughputs, jobs_per_hour=jobs_per_hour)


def _instance_from_job_trace(
    path: str | Path, trace_format: str, cluster: Mapping[str, int] | None, *, seed: int,
    num_jobs: int | None, keep_failed: bool, max_scale_factor: int, round_s: float,
    task_table: str | Path | None, throughputs: str | ThroughputTable | None,
    jobs_per_hour: float | None,
) -> Instance:
    """A Philly, Helios or PAI trace as an Instance (job types drawn with ``seed``)."""
    # cheap checks first: a bad rate or table name fails before a 10^6-row file is read
    if jobs_per_hour is not None:
        _check_rate(jobs_per_hour)
    table = None if throughputs is None else resolve_throughputs(throughputs)
    jobs = read_trace_jobs(path, trace_format, keep_failed=keep_failed, task_table=task_table)
    return trace_jobs_to_instance(
        jobs, cluster, seed=seed, num_jobs=num_jobs, max_scale_factor=max_scale_factor,
        jobs_per_hour=jobs_per_hour, table=table,
        round_s=round_s, name=f"{Path(path).name.split('.')[0]}-{trace_format}",
        description=(f"{trace_format} trace {Path(path).name}: first "
                     f"{num_jobs if num_jobs is not None else 'all'} usable jobs; job types "
                     f"drawn with seed {seed}; durations taken as V100 run times"),
    )


def rescale_arrivals(instance: Instance, jobs_per_hour: float) -> Instance:
    """Stretch or compress arrival times so the mean arrival rate is ``jobs_per_hour``.

    With J jobs arriving over [0, a_max], the trace's rate is (J - 1) / a_max per second; every
    arrival is multiplied by (J - 1) / a_max / (jobs_per_hour / 3600), which keeps the order
    and the burstiness of the trace.  A trace whose jobs all arrive at once is left as it is.
    """
    arrivals = [job.arrival for job in instance.jobs]
    factor = _rate_factor(arrivals, jobs_per_hour)
    if factor == 1.0:
        return instance
    data = instance.to_dict()
    for job in data["jobs"]:
        job["arrival"] = float(job.get("arrival", 0.0)) * factor
    return instance_from_dict(data, source=instance.name)


def _rate_factor(arrivals: Sequence[float], jobs_per_hour: float) -> float:
    """(J - 1) / span / (jobs_per_hour / 3600): what :func:`rescale_arrivals` multiplies every
    arrival by; 1 when fewer than two jobs or all arrive at once."""
    _check_rate(jobs_per_hour)
    span = max(arrivals, default=0.0) - min(arrivals, default=0.0)
    if len(arrivals) < 2 or span <= 0:
        return 1.0
    return (len(arrivals) - 1) / span / (jobs_per_hour / 3600.0)


def _check_rate(jobs_per_hour: float) -> None:
    if not (math.isfinite(jobs_per_hour) and jobs_per_hour > 0):
        raise InputError(f"jobs_per_hour must be positive, got {jobs_per_hour!r}")
