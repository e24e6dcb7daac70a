"""A table kind: how an experiment of that table becomes cells, and cells become a report.

Every paper table (``schedlab.analysis.tables.<table>``) defines one :class:`TableKind` named
``KIND``; the runner (:mod:`schedlab.analysis.experiments.runner`) drives them all the same
way: ``settings(spec)`` checks the spec and gives the table's settings, ``plan(settings)``
the cells, ``compute(cell)`` one cell's result (a module-level function: it runs in a worker
process or a Ray task), ``dump``/``load`` the cell file's JSON, ``reduce(settings, results)``
the table, and ``document``/``frame``/``figures`` its report (Markdown and LaTeX, CSV, PNGs).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from schedlab.analysis.experiments.spec import TABLES, Experiment
from schedlab.analysis.tables.output import Document
from schedlab.errors import InputError


def _no_figures(table: Any, folder: Path) -> list[Path]:
    return []


def _success(table: Any) -> int:
    return 0


@dataclass(frozen=True)
class TableKind:
    """The pieces of one table kind (module docstring)."""

    name: str
    settings: Callable[[Experiment], Any]
    plan: Callable[[Any], Sequence[Any]]
    compute: Callable[[Any], Any]
    dump: Callable[[Any], dict[str, Any]]
    load: Callable[[dict[str, Any]], Any]
    key: Callable[[Any], Hashable]
    describe: Callable[[Any], str]
    reduce: Callable[[Any, Mapping[Any, Any]], Any]
    document: Callable[[Any], Document]
    frame: Callable[[Any], pd.DataFrame]
    seeds: Callable[[Any], Sequence[int]]
    figures: Callable[[Any, Path], list[Path]] = _no_figures
    exit_code: Callable[[Any], int] = _success
    #: Sub-folder of the output folder that holds the cell files.
    cells_folder: str = "cells"


def table_kind(name: str) -> TableKind:
    """The :class:`TableKind` of table ``name`` (imported on first use)."""
    if name not in TABLES:
        raise InputError(f"unknown table {name!r} (known: {', '.join(TABLES)})", field="table")
    module = importlib.import_module(f"schedlab.analysis.tables.{name}")
    kind = module.KIND
    assert isinstance(kind, TableKind)
    return kind


__all__ = ["TableKind", "table_kind"]
