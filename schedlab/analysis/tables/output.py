"""One output format for every paper table: Markdown, CSV and LaTeX of the same rows, and a
manifest that says how they were made.

**API** (what a table module calls):

* :func:`pm` ``(mean, std, spec, scale=1.0, seeds=1)`` -- the text of one cell, ``"1.23 ± 0.04"``
  (mean ± sample std over seeds; the mean alone for one seed; ``"-"`` for NaN).
* :func:`mean_std_columns` ``(key, mean, std)`` -- ``{"<key>_mean": mean, "<key>_std": std}``,
  for CSV rows that keep mean and std as separate numeric columns.
* A table's text is a :class:`Document`: a ``title`` and ``parts`` in order, each a
  paragraph (``str``), a :class:`Heading` or a :class:`Block` (header, rows of cell texts,
  one alignment letter per column ``l``/``r``/``c``).  :func:`render_markdown` and
  :func:`render_latex` render the same document; the LaTeX is a booktabs ``tabular`` per
  block (``\\toprule``/``\\midrule``/``\\bottomrule``; needs ``\\usepackage{booktabs}``),
  with the title, headings and paragraphs as ``%`` comments, every cell escaped by
  :func:`latex_escape`.
* :func:`write_table_files` ``(folder, stem, document, frame)`` -- writes ``<stem>.md``,
  ``<stem>.csv`` (``frame``, numbers only, no "±" strings) and ``<stem>.tex`` atomically;
  returns the three paths.
* :func:`write_manifest` ``(folder, stem, files, *, seeds, settings=None, command=None,
  started=None, experiment=None)`` -- writes ``<stem>.manifest.json`` (named by the table,
  so several tables may share one ``--out`` folder) and returns its path.  Its fields
  (:func:`manifest`):
  ``table``, ``schedlab_version``, ``python``, ``libraries`` (version of highspy, pyomo,
  numpy, scipy, pandas, torch, gurobipy from :mod:`importlib.metadata`; ``null`` when not
  installed), ``seeds``, ``settings`` (the table's settings as JSON, when given),
  ``experiment`` (the experiment spec that was run, when given), ``command`` (the argument
  list; default ``sys.argv``), ``machine`` (platform, machine, processor, CPU count,
  hostname, total memory in bytes), ``started``/``finished`` (UTC,
  ISO 8601), ``code_digest`` (:func:`~schedlab.analysis.tables.cells.code_digest`) and
  ``files`` (name relative to the folder, size in bytes, sha256 of the content) for every
  file written.

A typical ``write_outputs``::

    written = write_table_files(folder, "shockwave", document(table), to_frame(table))
    written.append(plot_table(table, folder / "shockwave.png"))
    written.append(write_manifest(folder, "shockwave", written, seeds=cfg.seeds,
                                  settings=cfg, command=command, started=started))

Results are plain CSV and JSON: nothing here (or in the cell caches) is pickled.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import platform
import socket
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from schedlab.analysis.tables.cells import code_digest
from schedlab.atomic import atomic_path, write_bytes_atomic

#: Libraries whose versions the manifest records (distribution names).
LIBRARIES: tuple[str, ...] = ("highspy", "pyomo", "numpy", "scipy", "pandas", "torch",
                              "gurobipy")
#: Manifest layout version.
MANIFEST_FORMAT = 1
#: The manifest's file name after the table's stem.
MANIFEST_SUFFIX = ".manifest.json"

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "×": r"$\times$",
    "ρ": r"$\rho$",
    "σ": r"$\sigma$",
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "−": "-",
    "…": r"\ldots{}",
}


# ---------------------------------------------------------------------------- cell text


def pm(mean: float, std: float, spec: str, scale: float = 1.0, seeds: int = 1) -> str:
    """``"<mean> ± <std>"`` (both times ``scale``, formatted by ``spec``) over ``seeds`` > 1
    seeds; the mean alone for one seed; ``"-"`` when the mean is NaN."""
    if math.isnan(mean):
        return "-"
    text = format(mean * scale, spec)
    return f"{text} ± {format(std * scale, spec)}" if seeds > 1 else text


def mean_std_columns(key: str, mean: float, std: float) -> dict[str, float]:
    """``{"<key>_mean": mean, "<key>_std": std}``: one statistic as two CSV columns."""
    return {f"{key}_mean": mean, f"{key}_std": std}


def latex_escape(text: str) -> str:
    """``text`` safe inside a LaTeX cell: ``\\ & % $ # _ { } ~ ^`` escaped, and ``±``,
    ``×``, ``ρ``, ``σ``, ``≤``, ``≥`` as math (``$\\pm$``, ...)."""
    return "".join(_LATEX_SPECIAL.get(char, char) for char in text)


def markdown_escape(text: str) -> str:
    """``text`` safe inside a Markdown table cell (``|`` escaped, newlines as spaces)."""
    return text.replace("|", "\\|").replace("\n", " ")


# ------------------------------------------------------------------------------ document


@dataclass(frozen=True)
class Heading:
    """A section heading (Markdown ``##``; a ``%`` comment in LaTeX)."""

    text: str


@dataclass(frozen=True)
class Block:
    """One table: a header, rows of cell texts, one alignment letter (``l``, ``r``, ``c``)
    per column (default: the first column left, the others right)."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    align: str = ""

    def __post_init__(self) -> None:
        width = len(self.header)
        if not self.align:
            object.__setattr__(self, "align", "l" + "r" * (width - 1))
        if len(self.align) != width or set(self.align) - set("lrc"):
            raise ValueError(f"align {self.align!r} does not fit {width} columns")
        for row in self.rows:
            if len(row) != width:
                raise ValueError(f"row {list(row)!r} has {len(row)} cells, header {width}")


@dataclass(frozen=True)
class Document:
    """A table's text: a title and, in order, paragraphs, headings and blocks."""

    title: str
    parts: Sequence[str | Heading | Block] = field(default_factory=tuple)


_MD_RULE = {"l": "---", "r": "---:", "c": ":---:"}


def render_markdown(document: Document) -> str:
    """The document as Markdown: ``# title``, then each part separated by a blank line."""
    chunks = [f"# {document.title}"]
    for part in document.parts:
        if isinstance(part, Heading):
            chunks.append(f"## {part.text}")
        elif isinstance(part, Block):
            lines = ["| " + " | ".join(markdown_escape(h) for h in part.header) + " |",
                     "|" + "|".join(_MD_RULE[a] for a in part.align) + "|"]
            lines += ["| " + " | ".join(markdown_escape(c) for c in row) + " |"
                      for row in part.rows]
            chunks.append("\n".join(lines))
        else:
            chunks.append(part)
    return "\n\n".join(chunks) + "\n"


def _comment(text: str) -> list[str]:
    return ["% " + line if line else "%" for line in text.splitlines() or [""]]


def render_latex(document: Document) -> str:
    """The document as LaTeX: one booktabs ``tabular`` per block; the title, headings and
    paragraphs as ``%`` comments before the block they precede."""
    lines = _comment(document.title)
    for part in document.parts:
        if isinstance(part, Heading):
            lines += ["%", *_comment(part.text)]
        elif isinstance(part, Block):
            lines += ["", rf"\begin{{tabular}}{{{part.align}}}", r"\toprule",
                      " & ".join(latex_escape(h) for h in part.header) + r" \\", r"\midrule"]
            lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in part.rows]
            lines += [r"\bottomrule", r"\end{tabular}", ""]
        else:
            lines += _comment(part)
    return "\n".join(lines).rstrip("\n") + "\n"


# --------------------------------------------------------------------------------- files


def write_table_files(folder: str | Path, stem: str, document: Document,
                      frame: pd.DataFrame) -> list[Path]:
    """Write ``<stem>.md``, ``<stem>.csv`` and ``<stem>.tex`` into ``folder`` (created),
    each atomically; return the three paths."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    markdown = out / f"{stem}.md"
    write_bytes_atomic(markdown, render_markdown(document).encode())
    csv = out / f"{stem}.csv"
    with atomic_path(csv, suffix=".csv") as tmp:
        frame.to_csv(tmp, index=False)
    latex = out / f"{stem}.tex"
    write_bytes_atomic(latex, render_latex(document).encode())
    return [markdown, csv, latex]


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's content."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def library_versions(names: Iterable[str] = LIBRARIES) -> dict[str, str | None]:
    """Installed version of each distribution (``None`` when it is not installed)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def total_memory_bytes() -> int | None:
    """Physical memory of this machine in bytes (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def machine() -> dict[str, Any]:
    """Where the table ran: platform, machine, processor, CPU count, hostname, memory."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
        "memory_bytes": total_memory_bytes(),
    }


def _utc(moment: dt.datetime | None) -> str:
    moment = moment or dt.datetime.now(dt.UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds")


def _jsonable(value: Any) -> Any:
    """Settings as JSON: dataclasses as dicts, tuples as lists, other objects as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def manifest(folder: str | Path, stem: str, files: Sequence[str | Path], *,
             seeds: Sequence[int], settings: Any = None,
             command: Sequence[str] | None = None,
             started: dt.datetime | None = None,
             experiment: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The manifest's content (module docstring); ``files`` must exist."""
    from schedlab import __version__

    root = Path(folder).resolve()
    entries = []
    for path in files:
        resolved = Path(path).resolve()
        name = (resolved.relative_to(root).as_posix() if resolved.is_relative_to(root)
                else str(resolved))
        entries.append({"name": name, "bytes": resolved.stat().st_size,
                        "sha256": sha256_file(resolved)})
    return {
        "format": MANIFEST_FORMAT,
        "table": stem,
        "schedlab_version": __version__,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "libraries": library_versions(),
        "seeds": [int(s) for s in seeds],
        "settings": _jsonable(settings) if settings is not None else None,
        "experiment": dict(experiment) if experiment is not None else None,
        "command": list(command) if command is not None else list(sys.argv),
        "machine": machine(),
        "started": _utc(started) if started is not None else None,
        "finished": _utc(None),
        "code_digest": code_digest(),
        "files": entries,
    }


def write_manifest(folder: str | Path, stem: str, files: Sequence[str | Path], *,
                   seeds: Sequence[int], settings: Any = None,
                   command: Sequence[str] | None = None,
                   started: dt.datetime | None = None,
                   experiment: Mapping[str, Any] | None = None) -> Path:
    """Write ``<stem>.manifest.json`` into ``folder`` atomically (see :func:`manifest`)."""
    content = manifest(folder, stem, files, seeds=seeds, settings=settings, command=command,
                       started=started, experiment=experiment)
    path = Path(folder) / f"{stem}{MANIFEST_SUFFIX}"
    write_bytes_atomic(path, (json.dumps(content, indent=2) + "\n").encode())
    return path


__all__ = [
    "LIBRARIES",
    "MANIFEST_SUFFIX",
    "Block",
    "Document",
    "Heading",
    "latex_escape",
    "library_versions",
    "machine",
    "manifest",
    "markdown_escape",
    "mean_std_columns",
    "pm",
    "render_latex",
    "render_markdown",
    "sha256_file",
    "write_manifest",
    "write_table_files",
]
