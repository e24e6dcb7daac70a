"""Throughput tables read from files, and the conversion of Gavel's (and Shockwave's) format.

Two layouts are read (:func:`read_throughput_file`):

- **schedlab's** ``schedlab/throughput-table@1`` (the shipped tables' layout):
  ``throughputs[job_type][scale_factor][accelerator]`` in steps/s, ``accelerators``,
  ``prices_per_gpu_hour``, optional ``missing`` and ``provenance``;
- **Gavel's** raw throughput file, the layout of Gavel's ``simulation_throughputs.json`` and
  Shockwave's ``tacc_throughputs.json``: ``{worker_type: {"('<job type>', <scale factor>)":
  {"null": steps/s alone, "('<other type>', <sf>)": [pair throughputs]}}}``.  Only the
  ``"null"`` entries (the job running alone) are kept; the co-location pairs are dropped, and so
  are worker types named ``<type>_unconsolidated`` (throughputs of a multi-GPU job spread
  over servers: an Instance has one throughput per accelerator type, so these have no place).
  :func:`document_from_gavel_format` does the conversion, number for number.

:func:`resolve_throughputs` takes a shipped table's name (``gavel``, ``shockwave-tacc``) or a
file path, so a command-line option can accept either.  Every problem of a file raises
:class:`~schedlab.errors.InputError` naming the file and the entry.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from schedlab.errors import InputError, UnknownNameError
from schedlab.instance import read_document
from schedlab.workloads.throughputs import (
    GAVEL_DISTRIBUTED_FAMILIES,
    GAVEL_SCALE_FACTORS,
    THROUGHPUT_SOURCES,
    THROUGHPUT_TABLE_SCHEMA,
    ThroughputTable,
    _family_and_batch,
    _table_from_document,
    load_throughputs,
)

#: A key of Gavel's raw format: ``('ResNet-18 (batch size 32)', 2)``.
_GAVEL_KEY_RE = re.compile(r"^\('(?P<job_type>[^']+)', (?P<scale_factor>\d+)\)$")
#: Worker types of Gavel's format that are not accelerator types (dropped).
UNCONSOLIDATED_SUFFIX = "_unconsolidated"
#: Accelerator order of the documents written here (others after, alphabetically).
_ACCELERATOR_ORDER = {"v100": 0, "p100": 1, "k80": 2}

#: Where Shockwave's file comes from (the shipped ``shockwave-tacc`` table).
SHOCKWAVE_REPOSITORY = "https://github.com/uw-mad-dash/shockwave"
SHOCKWAVE_COMMIT = "8a44f4a27a45760520386809b695d51b665b3679"
SHOCKWAVE_TACC_PATH = "scheduler/tacc_throughputs.json"


def _finite_rate(value: Any, file: str, field: str) -> float:
    """A throughput: a finite number >= 0 (steps/s)."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise InputError(f"a throughput is a finite number >= 0 (steps/s), got {value!r}",
                         file=file, field=field)
    return float(value)


def is_gavel_format(doc: Any) -> bool:
    """Whether ``doc`` looks like Gavel's raw format: worker types mapping to
    ``('<job type>', <sf>)`` keys."""
    if not isinstance(doc, dict) or not doc or "schema" in doc:
        return False
    first = next(iter(doc.values()))
    return isinstance(first, dict) and all(
        isinstance(k, str) and _GAVEL_KEY_RE.match(k) for k in list(first)[:3])


def document_from_gavel_format(raw: Mapping[str, Any], *, file: str,
                               provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``schedlab/throughput-table@1`` document of a file in Gavel's raw format.

    ``throughputs[job_type][sf][k] = raw[k]["('job_type', sf)"]["null"]`` exactly, for every
    worker type k that is not ``*_unconsolidated``; co-location entries are dropped.
    ``missing`` lists the (job type, scale factor) of Gavel's data-parallel families
    (ResNet-18, ResNet-50, Transformer, LM on 1, 2, 4, 8 GPUs) that no worker type measured.
    No prices (the format has none).  A malformed entry raises
    :class:`~schedlab.errors.InputError` naming ``file`` and the entry.
    """
    if not isinstance(raw, Mapping) or not raw:
        raise InputError("expected {worker type: {\"('<job type>', <scale factor>)\": "
                         "{\"null\": steps/s, ...}}}", file=file)
    table: dict[str, dict[int, dict[str, float]]] = {}
    accelerators: list[str] = []
    dropped: list[str] = []
    for worker, entries in raw.items():
        if str(worker).endswith(UNCONSOLIDATED_SUFFIX):
            dropped.append(str(worker))
            continue
        if not isinstance(entries, Mapping):
            raise InputError("expected a map of (job type, scale factor) entries",
                             file=file, field=str(worker))
        accelerators.append(str(worker))
        for key, entry in entries.items():
            where = f"{worker}.{key}"
            match = _GAVEL_KEY_RE.match(str(key))
            if match is None:
                raise InputError("expected a key \"('<job type>', <scale factor>)\"",
                                 file=file, field=where)
            if not isinstance(entry, Mapping) or "null" not in entry:
                raise InputError("expected {\"null\": steps/s of the job alone, ...}",
                                 file=file, field=where)
            sf = int(match.group("scale_factor"))
            if sf < 1:
                raise InputError("the scale factor must be >= 1", file=file, field=where)
            rate = _finite_rate(entry["null"], file, f"{where}.null")
            table.setdefault(match.group("job_type"), {}).setdefault(sf, {})[str(worker)] = rate
    if not accelerators:
        raise InputError("no worker type besides *_unconsolidated ones", file=file)
    accelerators.sort(key=lambda a: (_ACCELERATOR_ORDER.get(a, 99), a))
    missing = []
    for job_type in sorted(table):
        if _family_and_batch(job_type)[0] in GAVEL_DISTRIBUTED_FAMILIES:
            missing += [{"job_type": job_type, "scale_factor": sf,
                         "why": "data-parallel in Gavel's JobTable, not in the file"}
                        for sf in GAVEL_SCALE_FACTORS if sf not in table[job_type]]
    return {
        "schema": THROUGHPUT_TABLE_SCHEMA,
        "description": (
            "Whole-job throughput (steps/s on scale_factor GPUs, job running alone) per "
            "(job type, scale factor) and accelerator type, converted from Gavel's "
            "throughput-file format ('null' entries)."),
        "provenance": {
            "converted_from": Path(file).name,
            "kept": "the 'null' entry (job alone) of every (job type, scale factor) of every "
                    "worker type, unchanged",
            "dropped": "co-location pair entries"
                       + (f"; worker types {', '.join(dropped)}" if dropped else ""),
            "zero_throughput": "0.0 is the file's own entry: the job cannot run on that type",
            **(provenance or {}),
        },
        "units": {"throughputs": "steps/s", "prices_per_gpu_hour": "$ per GPU-hour"},
        "accelerators": accelerators,
        "prices_per_gpu_hour": {},
        "prices_source": "none: the source file has no prices",
        "missing": missing,
        "throughputs": {
            t: {str(s): {a: table[t][s][a] for a in accelerators if a in table[t][s]}
                for s in sorted(table[t])}
            for t in sorted(table)
        },
    }


def _check_document(doc: Mapping[str, Any], file: str) -> None:
    """Raise :class:`InputError` (naming ``file`` and the field) unless ``doc`` is a valid
    ``schedlab/throughput-table@1`` document."""
    accelerators = doc.get("accelerators")
    if not isinstance(accelerators, list) or not all(isinstance(a, str) for a in accelerators):
        raise InputError("expected a list of accelerator types", file=file,
                         field="accelerators")
    prices = doc.get("prices_per_gpu_hour", {})
    if not isinstance(prices, Mapping):
        raise InputError("expected {accelerator: $ per GPU-hour}", file=file,
                         field="prices_per_gpu_hour")
    for acc, price in prices.items():
        _finite_rate(price, file, f"prices_per_gpu_hour.{acc}")
    raw = doc.get("throughputs")
    if not isinstance(raw, Mapping) or not raw:
        raise InputError("expected {job type: {scale factor: {accelerator: steps/s}}}",
                         file=file, field="throughputs")
    for job_type, by_sf in raw.items():
        where = f"throughputs[{job_type!r}]"
        if not isinstance(by_sf, Mapping):
            raise InputError("expected {scale factor: {accelerator: steps/s}}", file=file,
                             field=where)
        for sf, by_acc in by_sf.items():
            if not str(sf).isdigit() or int(sf) < 1:
                raise InputError(f"a scale factor is an integer >= 1, got {sf!r}", file=file,
                                 field=where)
            if not isinstance(by_acc, Mapping):
                raise InputError("expected {accelerator: steps/s}", file=file,
                                 field=f"{where}[{sf}]")
            for acc, rate in by_acc.items():
                if acc not in accelerators:
                    raise InputError(f"accelerator {acc!r} is not in 'accelerators'",
                                     file=file, field=f"{where}[{sf}].{acc}")
                _finite_rate(rate, file, f"{where}[{sf}].{acc}")
    missing = doc.get("missing", [])
    if not isinstance(missing, list) or not all(
            isinstance(m, Mapping) and "job_type" in m and "scale_factor" in m
            for m in missing):
        raise InputError("expected a list of {job_type, scale_factor}", file=file,
                         field="missing")


def read_throughput_file(path: str | Path) -> ThroughputTable:
    """A throughput table from a JSON (or YAML) file in schedlab's layout or Gavel's raw
    format (module docstring); ``source`` is the path.  Errors name the file and the entry."""
    file = str(path)
    doc = read_document(path)
    if is_gavel_format(doc):
        doc = document_from_gavel_format(doc, file=file)
    elif not isinstance(doc, dict) or doc.get("schema") != THROUGHPUT_TABLE_SCHEMA:
        raise InputError(f"expected a throughput table (schema {THROUGHPUT_TABLE_SCHEMA!r}) or "
                         "Gavel's throughput-file format", file=file, field="schema")
    _check_document(doc, file)
    return _table_from_document(doc, source=file)


def resolve_throughputs(source: str | ThroughputTable) -> ThroughputTable:
    """A table: ``source`` itself, a shipped table by name (``gavel``, ``shockwave-tacc``),
    or a file read by :func:`read_throughput_file` (a name ending in ``.json``, ``.json.gz``,
    ``.yaml`` or ``.yml``, or an existing file).  Anything else raises
    :class:`~schedlab.errors.UnknownNameError` naming the field ``throughputs``."""
    if isinstance(source, ThroughputTable):
        return source
    if source in THROUGHPUT_SOURCES:
        return load_throughputs(source)
    suffixes = (".json", ".json.gz", ".yaml", ".yml")
    if source.lower().endswith(suffixes) or Path(source).is_file():
        return read_throughput_file(source)
    raise UnknownNameError(f"unknown throughput source {source!r}: give "
                           f"{' or '.join(THROUGHPUT_SOURCES)} or a .json file",
                           field="throughputs")


def throughputs_digest(source: str) -> str | None:
    """12 hex digits of a throughput file's bytes (None for a shipped table's name): a run
    keyed by it is not reused after the file changed."""
    if source in THROUGHPUT_SOURCES:
        return None
    try:
        return hashlib.sha256(Path(source).read_bytes()).hexdigest()[:12]
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=source,
                         field="throughputs") from None


def build_shockwave_tacc_table(raw_path: str | Path) -> dict[str, Any]:
    """The shipped ``shockwave-tacc`` document from Shockwave's ``tacc_throughputs.json``
    (``SHOCKWAVE_TACC_PATH`` at ``SHOCKWAVE_COMMIT``): :func:`document_from_gavel_format`
    plus its provenance and the original file's sha256."""
    path = Path(raw_path)
    document = document_from_gavel_format(read_document(path), file=str(path), provenance={
        "source": f"Shockwave ({SHOCKWAVE_REPOSITORY}) {SHOCKWAVE_TACC_PATH}",
        "shockwave_commit": SHOCKWAVE_COMMIT,
        "original_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "licence": "MIT (LICENSE beside this file)",
    })
    document["description"] = (
        "Whole-job throughput (steps/s on scale_factor GPUs, job running alone) per (job type, "
        "scale factor) and accelerator type, as measured by Shockwave (V100, P100, K80; "
        "tacc_throughputs.json, the file its published traces were generated with).")
    return document
