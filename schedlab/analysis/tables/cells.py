"""What every paper table's cells share: the code digest in their keys, file-safe names,
their JSON files, and the statistics over seeds.

A table is a grid of *cells* (one simulation or solve each: a seed, a policy, ...).  Each
finished cell is written atomically as a JSON file whose name carries a digest of everything
its result depends on (:func:`code_digest` among them), so a re-run reuses it and an
interrupted table resumes where it stopped; the experiment runner
(:mod:`schedlab.analysis.experiments.runner`) does the running and the caching.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from schedlab.atomic import write_bytes_atomic
from schedlab.errors import InputError

log = logging.getLogger(__name__)


ResultT = TypeVar("ResultT")


@functools.cache
def code_digest() -> str:
    """sha256 of the source of every ``schedlab`` module a cell runs: all ``*.py`` files of the
    package except ``schedlab/analysis/`` and the command line ``schedlab/cli/`` (computed once
    per process), so a cached cell is never reused after that code changed."""
    import schedlab

    root = Path(schedlab.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(("analysis/", "cli/")):
            continue
        digest.update(relative.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def file_safe(name: str) -> str:
    """``name`` with every character outside [A-Za-z0-9_.+-] replaced by '-' (a policy or
    scheme name inside a cell's file name)."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "-", name)


def write_cell_json(folder: str | Path, file_name: str, payload: object) -> None:
    """Write a cell's result ``payload`` as JSON to ``folder/file_name``, atomically."""
    write_bytes_atomic(Path(folder) / file_name, json.dumps(payload, indent=1).encode())


def read_cell_json(path: Path, parse: Callable[[dict[str, Any]], ResultT]) -> ResultT | None:
    """A cell file parsed by ``parse``, or None (with a warning: the cell runs again) when
    it cannot be read or parsed."""
    try:
        return parse(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable cell file %s (%s); running it again", path, exc)
        return None


def check_seeds(seeds: Sequence[int]) -> None:
    """Raise :class:`~schedlab.errors.InputError` (field ``seeds``) unless the table's seeds
    are distinct integers >= 0, at least one."""
    if not seeds or len(set(seeds)) != len(seeds):
        raise InputError("the table needs distinct seeds", field="seeds")
    if any(s < 0 for s in seeds):
        raise InputError("seeds must be >= 0", field="seeds")


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """(mean, sample standard deviation) over seeds; std 0 for one value; NaN when any value
    is NaN or there is none."""
    array = np.asarray(values, dtype=float)
    if not len(array) or np.isnan(array).any():
        return math.nan, math.nan
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else 0.0


def ratio(value: float, reference: float) -> float:
    """value / reference; NaN when either is NaN or the reference is 0."""
    if math.isnan(value) or math.isnan(reference) or reference == 0:
        return math.nan
    return value / reference


__all__ = ["check_seeds", "code_digest", "file_safe", "mean_std", "ratio", "read_cell_json",
           "write_cell_json"]


def columns_json(frame: Any, columns: Sequence[str]) -> dict[str, list[Any]]:
    """``frame``'s ``columns`` as JSON lists, a float NaN written as null."""
    return {column: [None if isinstance(v, float) and math.isnan(v) else v
                     for v in frame[column].tolist()] for column in columns}
