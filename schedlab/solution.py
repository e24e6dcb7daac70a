"""The result of solving an Instance with a formulation, and its JSON form.

Only the parts a formulation produces are filled:

* ``allocation[job][accelerator]`` - share of wall-clock time X[j,k] in [0, 1] (Gavel).
* ``colocated_allocation`` - shares of co-located pairs (Gavel space sharing).
* ``schedule`` - timed placements (Saturn, Hare, Titan).
* ``rounds`` - per-round placements produced by the round-based mechanism.
* ``groups`` - merged task groups (Titan).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import to_json

from schedlab.atomic import write_bytes_atomic
from schedlab.errors import InputError
from schedlab.instance import read_document

SOLUTION_SCHEMA = "schedlab/solution@1"


class Status(StrEnum):
    """Honest solve status: ``optimal`` only when the solver proved it."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    TIME_LIMIT = "time_limit"
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        """True when the solution carries a usable allocation or schedule."""
        return self in (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT)


#: From most to least proven: the order in which :func:`worst_status` ranks statuses.
_PROOF_ORDER = (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT, Status.UNBOUNDED,
                Status.INFEASIBLE, Status.ERROR)


def worst_status(*statuses: Status) -> Status:
    """The least proven of ``statuses`` (an iterative method's status is the worst of its
    sub-solves): optimal < feasible < time_limit < unbounded < infeasible < error."""
    return max(statuses, key=_PROOF_ORDER.index)


#: Relative gap within which ``optimal`` may stand: HiGHS' default relative MIP gap.  A
#: solution whose ``metrics["gap_tolerance"]`` is smaller is held to that instead.
OPTIMAL_GAP_TOLERANCE = 1e-4


def settle_status(solution: Solution) -> Solution:
    """Apply the status rule every method's ``solve`` ends with (in place; returns it).

    * A bound must be finite; without a bound or an objective there is no gap.
    * ``optimal`` stands only when ``gap <= min(OPTIMAL_GAP_TOLERANCE, gap_tolerance)``, where
      ``gap_tolerance`` is ``metrics["gap_tolerance"]`` (the requested ``--mip-gap``) when
      recorded; otherwise the status becomes ``feasible`` and a diagnostic gives the gap, the
      tolerance and the requested MIP gap.  A MIP stopped at a loose ``--mip-gap`` is a good
      solution, not a proven optimum.
    """
    if solution.bound is not None and not math.isfinite(solution.bound):
        solution.bound = None
    if solution.bound is None or solution.objective is None:
        solution.gap = None
    if solution.status != Status.OPTIMAL:
        return solution
    requested = solution.metrics.get("gap_tolerance")
    tolerance = OPTIMAL_GAP_TOLERANCE
    if isinstance(requested, int | float) and not isinstance(requested, bool):
        tolerance = min(tolerance, float(requested))
    gap = solution.gap
    if gap is not None and gap <= tolerance * (1 + 1e-9) + 1e-12:
        return solution
    solution.status = Status.FEASIBLE
    shown = "none" if gap is None else f"{gap:.3g}"
    asked = f"; requested --mip-gap {requested:g}" if isinstance(requested, int | float) else ""
    solution.diagnostics.append(
        f"status: feasible, not optimal: gap {shown} is not within the optimality tolerance "
        f"{tolerance:g}{asked}")
    return solution


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InstanceRef(_Model):
    """Which instance a solution belongs to."""

    name: str
    hash: str


class Timings(_Model):
    """Wall seconds per phase."""

    build_s: float = 0.0
    solve_s: float = 0.0
    extract_s: float = 0.0
    check_s: float = 0.0

    @property
    def total_s(self) -> float:
        """Sum of all phases, s."""
        return self.build_s + self.solve_s + self.extract_s + self.check_s


class PairShare(_Model):
    """Share of time the co-located pair ``jobs`` runs together on ``accelerator``."""

    jobs: tuple[str, str]
    accelerator: str
    fraction: float


class ScheduleEntry(_Model):
    """One timed placement: ``job`` runs on ``gpus`` GPUs from ``start`` to ``end`` (s).

    A Hare task is one entry: ``round`` (0-based), ``task`` (its index 0..m_j-1 within the
    round), ``accelerator`` and ``gpu_ids`` = [the GPU's index within that type's pool,
    0..n_k-1], ``gpus`` = 1.
    """

    job: str
    start: float
    end: float
    accelerator: str | None = None
    node: str | None = None
    gpus: int = 1
    config: str | None = None
    round: int | None = None
    task: int | None = None
    gpu_ids: list[int] | None = None


class Placement(_Model):
    """One job's placement within a round: ``gpus`` GPUs of ``accelerator``.

    ``gpu_ids`` are indices within the accelerator pool (0..n_k-1); ``partner`` names the job
    sharing those GPUs under space sharing.
    """

    job: str
    accelerator: str
    gpus: int
    gpu_ids: list[int] | None = None
    partner: str | None = None


class Solution(_Model):
    """What solving produced, with honest status, bound and gap."""

    schema_: Literal["schedlab/solution@1"] = Field(default="schedlab/solution@1", alias="schema")
    instance: InstanceRef
    formulation: str
    solver: str = "highs"
    status: Status
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    timings: Timings = Field(default_factory=Timings)
    allocation: dict[str, dict[str, float]] = Field(default_factory=dict)
    colocated_allocation: list[PairShare] = Field(default_factory=list)
    schedule: list[ScheduleEntry] = Field(default_factory=list)
    rounds: list[list[Placement]] = Field(default_factory=list)
    groups: list[list[str]] = Field(default_factory=list)
    metrics: dict[str, Any] = Field(default_factory=dict)
    diagnostics: list[str] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with the ``schema`` key."""
        return self.model_dump(mode="json", by_alias=True)

    def save(self, path: str | Path) -> None:
        """Write as JSON atomically, one top-level field, allocation row, round or schedule
        entry per line (the layout of :func:`dumps_by_line`)."""
        write_bytes_atomic(path, self.json_by_line())

    def json_by_line(self) -> bytes:
        """The document of ``dumps_by_line(self.to_dict())``, each piece serialized by
        pydantic's Rust encoder (a 10 000-job solution with 20 rounds: ~0.02 s instead of
        ~0.27 s of CPU for the Python dicts and the json module; numbers may be spelled
        differently, e.g. ``0.00001`` for ``1e-05``, the values are the same).  NaN and
        infinities are refused (``ValueError``), as JSON has no such numbers."""
        fields = ((info.alias or name, getattr(self, name))
                  for name, info in type(self).model_fields.items())
        text = _by_line(fields, to_json)
        if b"NaN" in text or b"Infinity" in text:  # a number, or only inside some string?
            return dumps_by_line(self.to_dict()).encode("utf-8")  # raises on a number
        return text


def dumps_by_line(payload: dict[str, Any]) -> str:
    """JSON of ``payload`` with one top-level key per line and, inside a dict or list value,
    one entry per line; every entry itself compact.  Same document as ``json.dumps``, but
    every piece goes through the C encoder (``indent`` falls back to the pure-Python one:
    0.7 s of CPU for a 10 000-job solution with 20 rounds).  NaN and infinities are refused
    (``ValueError``), as JSON has no such numbers."""
    return _by_line(payload.items(),
                    lambda value: json.dumps(value, allow_nan=False).encode()).decode()


def _by_line(fields: Iterable[tuple[Any, Any]], encode: Callable[[Any], bytes]) -> bytes:
    """The by-line layout of :func:`dumps_by_line` over (key, value) ``fields``, every value
    (and every entry of a dict or list value) written compact by ``encode``."""

    def key(name: Any) -> bytes:
        return json.dumps(str(name)).encode()

    def block(value: Any) -> bytes:
        if isinstance(value, dict) and value:
            items = (b"    " + key(k) + b": " + encode(v) for k, v in value.items())
            return b"{\n" + b",\n".join(items) + b"\n  }"
        if isinstance(value, list) and value:
            return b"[\n" + b",\n".join(b"    " + encode(v) for v in value) + b"\n  ]"
        return encode(value)

    lines = (b"  " + key(name) + b": " + block(value) for name, value in fields)
    return b"{\n" + b",\n".join(lines) + b"\n}\n"


def load_solution(path: str | Path) -> Solution:
    """Read and validate a solution file; one :class:`InputError` on a bad file."""
    data = read_document(path)
    try:
        return Solution.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        raise InputError(str(err.get("msg")), file=str(path), field=loc or None) from None


def solution_json_schema() -> dict[str, Any]:
    """JSON Schema of the solution file format."""
    schema = Solution.model_json_schema(by_alias=True)
    schema["$id"] = SOLUTION_SCHEMA
    return schema
