"""The experiment spec: what a paper table or a user's sweep runs, as one typed document.

An experiment is a grid of *cells* -- workloads x policies x seeds (x the table's own axes,
such as Titan's densities) -- each one deterministic simulation or solve, reduced to metrics
and laid out as a report.  The spec says which (docs/experiments.md has the format and a
complete example; ``schedlab schema experiment`` prints its JSON Schema)::

    schema: schedlab/experiment@1
    name: titan                       # stem of the output files (titan.md, .csv, ...)
    table: titan                      # the table kind: its cells, metrics and report layout
    workloads:
      - generator: titan.paper        # or a file: {file: my.json}
        params: {trace_model: vit, density: 1.0, densities: [1.0, 1.5, 2.0]}
    policies:
      - {label: SRTF, name: srtf}
      - {label: Tiresias, name: tiresias, options: {thresholds_gpu_s: [14400.0]}}
    seeds: [0]
    simulator: {}                     # the simulator's settings the table reads
    report: {reference: srtf, figures: true}
    run: {workers: 2, backend: local}
    variants:                         # named overrides, e.g. `schedlab tables titan --quick`
      quick: {"workloads[0].params.densities": [1.0]}

:func:`load_experiment` reads a file, :func:`shipped_experiment` a paper's spec shipped in
this package; :func:`apply_overrides` applies ``--set PATH=VALUE`` and ``--set PATH+=VALUE``
(append to a list) before the document is checked, so every mistake is one
:class:`~schedlab.errors.InputError` naming the file or the ``--set`` text, the field path
(``workloads[0].params.gpus``) and the reason, raised before anything runs.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from schedlab.documents import parse_yaml, read_text
from schedlab.errors import InputError

SCHEMA = "schedlab/experiment@1"
#: The table kinds a spec may name (each in ``schedlab.analysis.tables.<kind>``).
TABLES: tuple[str, ...] = ("gavel", "shockwave", "titan", "hare", "saturn", "cross",
                           "pollux", "sia")
#: Backends that run the cells.
BACKENDS: tuple[str, ...] = ("local", "ray")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorkloadEntry(_Strict):
    """One workload: a named ``generator`` with ``params``, or an instance ``file``."""

    name: str | None = Field(default=None, description="label of the workload in the report")
    generator: str | None = Field(default=None, description="generator name, e.g. titan.paper")
    file: str | None = Field(default=None, description="instance file (relative to the spec file)")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="the generator's parameters")


class PolicyEntry(_Strict):
    """One row of the report: a registered policy or formulation ``name`` with ``options``
    (a bare name is short for ``{name: NAME}``: ``--set policies+=fifo``)."""

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    name: str = Field(description="registered name, e.g. srtf or hare.greedy")
    label: str | None = Field(default=None, description="row label (default: the name)")
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="keyword arguments of the policy")


class ReportSpec(_Strict):
    """How the report is laid out beyond the table's fixed columns."""

    reference: str | None = Field(default=None, description="policy the ratios are taken to")
    figures: bool = Field(default=True, description="draw the table's figures")


class RunOptions(_Strict):
    """Where the cells run."""

    workers: int = Field(default=2, ge=1, description="cells at once")
    backend: Literal["local", "ray"] = Field(default="local", description="local processes or Ray")
    address: str | None = Field(default=None, description="Ray cluster address (default: a local "
                                "Ray with `workers` CPUs)")


class Experiment(_Strict):
    """A checked experiment spec (module docstring)."""

    schema_: Literal["schedlab/experiment@1"] = Field(default="schedlab/experiment@1",
                                                      alias="schema")
    name: str = Field(description="stem of the output files")
    table: Literal["gavel", "shockwave", "titan", "hare", "saturn", "cross", "pollux",
                   "sia"] = Field(
        description="table kind: its cells, metrics and report layout")
    title: str | None = None
    description: str | None = None
    workloads: list[WorkloadEntry] = Field(default_factory=list)
    policies: list[PolicyEntry] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=list)
    simulator: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict,
                                     description="the table's other settings")
    report: ReportSpec = Field(default_factory=lambda: ReportSpec())
    run: RunOptions = Field(default_factory=lambda: RunOptions())
    variants: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="named overrides {path: value}, applied by name")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("name")
    @classmethod
    def _file_safe_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.+-]+", value):
            raise ValueError("must be a file-safe stem ([A-Za-z0-9_.+-])")
        return value

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: list[int]) -> list[int]:
        if any(s < 0 for s in value):
            raise ValueError("seeds must be >= 0")
        if len(set(value)) != len(value):
            raise ValueError("seeds must be distinct")
        return value

    def to_document(self) -> dict[str, Any]:
        """The spec as a plain document (``schema`` first; fields left at their defaults
        left out), for YAML/JSON output and the manifest."""
        body = self.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        body.pop("schema", None)
        return {"schema": SCHEMA, **body}

    def to_yaml(self) -> str:
        """The spec as YAML a user can copy, edit and run (``schedlab sweep FILE``); lists
        and mappings of plain values on one line each."""
        return yaml.safe_dump(self.to_document(), sort_keys=False, width=96,
                              default_flow_style=None, allow_unicode=True)


def experiment_schema() -> dict[str, Any]:
    """The JSON Schema of an experiment file (``schedlab schema experiment``)."""
    return Experiment.model_json_schema(by_alias=True)


# --------------------------------------------------------------------------- reading


def check_experiment(data: Any, source: str) -> Experiment:
    """``data`` (a parsed document) as an :class:`Experiment`, or one :class:`InputError`
    naming ``source``, the first bad field's path and the reason."""
    if not isinstance(data, Mapping):
        raise InputError("an experiment is a mapping (schema, name, table, ...)", file=source)
    try:
        return Experiment.model_validate(dict(data))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = _path_text(error["loc"])
        raise InputError(error["msg"], file=source, field=where or None) from None


def load_experiment(path: str | Path, overrides: Sequence[str] = (),
                    variants: Sequence[str] = ()) -> Experiment:
    """Read an experiment file (YAML or JSON), apply the named ``variants`` and then
    ``overrides`` (``--set`` texts), and check it."""
    text = read_text(path)
    data = parse_yaml(text, str(path))
    return _finish(data, str(path), overrides, variants)


def is_experiment_document(data: Any) -> bool:
    """Whether a parsed YAML/JSON document is an experiment (its ``schema`` says so) rather
    than a plain sweep file."""
    return isinstance(data, Mapping) and data.get("schema") == SCHEMA


def shipped_names() -> tuple[str, ...]:
    """The papers whose table specs ship with schedlab, in :data:`TABLES` order."""
    folder = resources.files(__package__ or "schedlab.analysis.experiments")
    return tuple(t for t in TABLES if folder.joinpath(f"{t}.yaml").is_file())


def shipped_document(table: str) -> dict[str, Any]:
    """The raw document of a paper's shipped spec (``<table>.yaml`` beside this module)."""
    if table not in shipped_names():
        raise InputError(f"no shipped experiment {table!r} (shipped: "
                         f"{', '.join(shipped_names())})", field="table")
    source = resources.files(__package__ or "schedlab.analysis.experiments")
    text = source.joinpath(f"{table}.yaml").read_text(encoding="utf-8")
    data = parse_yaml(text, f"{table}.yaml")
    assert isinstance(data, dict)
    return data


def shipped_experiment(table: str, overrides: Sequence[str] = (),
                       variants: Sequence[str] = ()) -> Experiment:
    """A paper's shipped spec with ``variants`` and ``overrides`` applied, checked."""
    return _finish(shipped_document(table), f"{table}.yaml", overrides, variants)


def _finish(data: Any, source: str, overrides: Sequence[str],
            variants: Sequence[str]) -> Experiment:
    if not isinstance(data, Mapping):
        raise InputError("an experiment is a mapping (schema, name, table, ...)", file=source)
    document = copy.deepcopy(dict(data))
    known = document.get("variants") or {}
    for variant in variants:
        if not isinstance(known, Mapping) or variant not in known:
            names = ", ".join(known) if isinstance(known, Mapping) else ""
            raise InputError(f"no variant {variant!r} (the spec has: {names or 'none'})",
                             file=source, field="variants")
        changes = known[variant]
        if not isinstance(changes, Mapping):
            raise InputError("a variant maps field paths to values", file=source,
                             field=f"variants.{variant}")
        for path, value in changes.items():
            append = str(path).endswith("+")
            set_path(document, str(path).rstrip("+"), value, append=append,
                     source=f"{source}: variants.{variant}")
    document = apply_overrides(document, overrides)
    return check_experiment(document, source)


# ------------------------------------------------------------------------- overrides

_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(-?\d+)\]")


def parse_path(path: str, source: str) -> list[str | int]:
    """``workloads[0].params.gpus`` -> ['workloads', 0, 'params', 'gpus']."""
    steps: list[str | int] = []
    for part in path.split("."):
        position = 0
        if not part:
            raise InputError(f"empty step in the path {path!r}", field=source)
        while position < len(part):
            match = _STEP.match(part, position)
            if match is None or (position > 0 and match.group(1)):
                raise InputError(f"cannot read the path {path!r} (expected name.name[0]...)",
                                 field=source)
            steps.append(match.group(1) if match.group(1) else int(match.group(2)))
            position = match.end()
    return steps


def set_path(document: dict[str, Any], path: str, value: Any, *, append: bool,
             source: str) -> None:
    """Set (or with ``append`` extend the list at) ``path`` inside ``document``; mappings
    along the path are created, list indices must exist."""
    steps = parse_path(path, source)
    node: Any = document
    for depth, step in enumerate(steps[:-1]):
        nxt = steps[depth + 1]
        if isinstance(step, int):
            if not isinstance(node, list) or not -len(node) <= step < len(node):
                raise InputError(f"{_path_text(steps[:depth + 1])} is not an existing list "
                                 "item", field=source)
            node = node[step]
            continue
        if not isinstance(node, dict):
            raise InputError(f"{_path_text(steps[:depth])} is not a mapping", field=source)
        if step not in node or node[step] is None:
            node[step] = [] if isinstance(nxt, int) else {}
        node = node[step]
    last = steps[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or not -len(node) <= last < len(node):
            raise InputError(f"{path} is not an existing list item", field=source)
        holder: Any = node
    else:
        if not isinstance(node, dict):
            raise InputError(f"{_path_text(steps[:-1])} is not a mapping", field=source)
        holder = node
    if append:
        current = holder[last] if (isinstance(last, int) or last in holder) else []
        if current is None:
            current = []
        if not isinstance(current, list):
            raise InputError(f"{path} is not a list, cannot append (use = to replace)",
                             field=source)
        extra = value if isinstance(value, list) else [value]
        holder[last] = [*current, *copy.deepcopy(extra)]
    else:
        holder[last] = copy.deepcopy(value)


def apply_overrides(document: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """A copy of ``document`` with each ``PATH=VALUE`` / ``PATH+=VALUE`` applied in order
    (VALUE is read as YAML: ``3``, ``[1, 2]``, ``{name: fifo}``, ``text``)."""
    result = copy.deepcopy(dict(document))
    for text in overrides:
        path, sep, raw = text.partition("=")
        if not sep or not path.strip():
            raise InputError(f"expected PATH=VALUE or PATH+=VALUE, got {text!r}",
                             field="--set")
        append = path.endswith("+")
        path = path[:-1] if append else path
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise InputError(f"cannot read the value of {text!r} as YAML "
                             f"({' '.join(str(exc).split())})", field="--set") from None
        set_path(result, path.strip(), value, append=append, source=f"--set {text}")
    return result


def _path_text(loc: Sequence[Any]) -> str:
    text = ""
    for step in loc:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += f".{step}" if text else str(step)
    return text


# ------------------------------------------------------------------ reading the fields


def frozen(value: Any) -> Any:
    """A spec value made hashable and tuple-shaped as the tables' settings hold it:
    lists become tuples (recursively), mappings stay mappings of frozen values."""
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    if isinstance(value, Mapping):
        return {k: frozen(v) for k, v in value.items()}
    return value


def policies_of(spec: Experiment) -> tuple[tuple[str, str, dict[str, Any]], ...]:
    """(label, name, options) of every policy row, in order (label default: the name)."""
    return tuple((p.label or p.name, p.name, frozen(p.options)) for p in spec.policies)


class FieldReader:
    """Reads a spec's fields for a table, each mistake one :class:`InputError` naming the
    field path (``workloads[0].params.gpus``); ``unknown`` keys of a mapping are refused."""

    def __init__(self, spec: Experiment) -> None:
        self.spec = spec

    def error(self, field: str, reason: str) -> InputError:
        """An InputError for ``field``."""
        return InputError(reason, field=field)

    def only_keys(self, where: str, mapping: Mapping[str, Any], allowed: Iterable[str]) -> None:
        """Refuse keys of ``mapping`` outside ``allowed``."""
        known = set(allowed)
        for key in mapping:
            if key not in known:
                raise self.error(f"{where}.{key}", "unknown setting (known: "
                                 f"{', '.join(sorted(known)) or 'none'})")

    def number(self, where: str, value: Any, *, integer: bool = False,
               positive: bool = False, at_least: float | None = None) -> Any:
        """A number (int when ``integer``), checked."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(where, f"expected a number, got {json.dumps(value)}")
        if integer and (not isinstance(value, int) and not float(value).is_integer()):
            raise self.error(where, f"expected an integer, got {value}")
        if value != value or value in (float("inf"), float("-inf")):
            raise self.error(where, "must be finite")
        if positive and not value > 0:
            raise self.error(where, f"must be > 0, got {value}")
        if at_least is not None and value < at_least:
            raise self.error(where, f"must be >= {at_least:g}, got {value}")
        return int(value) if integer else float(value)

    def sections(self, generators: Iterable[str],
                 params: Iterable[str] | Mapping[str, Iterable[str]],
                 simulator: Iterable[str] = (), settings: Iterable[str] = ()
                 ) -> tuple[WorkloadEntry, str]:
        """Check the sections a table reads: one workload of one of ``generators`` (no
        file) whose params are among ``params`` (or ``params[generator]``), the
        ``simulator`` and ``settings`` keys among those given, at least one seed; returns
        the workload and its generator."""
        entry, generator = self.one_workload(generators)
        if entry.file is not None:
            raise self.error("workloads[0].file", f"{generator} generates its workload "
                             "from params; it reads no workload file")
        known = params[generator] if isinstance(params, Mapping) else params
        self.only_keys("workloads[0].params", entry.params, known)
        self.only_keys("simulator", self.spec.simulator, simulator)
        self.only_keys("settings", self.spec.settings, settings)
        if not self.spec.seeds:
            raise self.error("seeds", "the table needs at least one seed")
        return entry, generator

    def one_workload(self, generators: Iterable[str]) -> tuple[WorkloadEntry, str]:
        """The spec's one workload and its generator, which must be one of ``generators``."""
        known = tuple(generators)
        if len(self.spec.workloads) != 1:
            raise self.error("workloads", f"this table takes one workload entry, got "
                             f"{len(self.spec.workloads)}")
        entry = self.spec.workloads[0]
        if entry.generator not in known:
            raise self.error("workloads[0].generator", f"expected one of {', '.join(known)}, "
                             f"got {entry.generator!r}")
        return entry, entry.generator


__all__ = [
    "BACKENDS", "SCHEMA", "TABLES", "Experiment", "FieldReader", "PolicyEntry", "ReportSpec",
    "RunOptions", "WorkloadEntry", "apply_overrides", "check_experiment", "experiment_schema",
    "frozen", "is_experiment_document", "load_experiment", "parse_path", "policies_of",
    "set_path", "shipped_document", "shipped_experiment", "shipped_names",
]
