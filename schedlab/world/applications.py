"""The ground truth of Pollux's (OSDI'21) and Sia's (SOSP'23) simulators: how fast one training
application runs on one GPU type at a placement and per-GPU batch size, and how much
statistical progress each of its epochs is worth, replayed from the authors' measured traces.

Written from the authors' code, read and run: Pollux, petuum/adaptdl branch ``osdi21-artifact``
at c793c70, ``simulator/applications.py`` (``Application`` 23-47, ``_validated_batch_sizes``
50-62, ``get_progress`` 132-136, ``get_completion_epoch`` 138-150, ``get_grad_stats`` 186-203,
``get_throughput`` 204-227, the application table 230-238); Sia, siasosp23/artifacts at
aaf7a0d, ``sia-simulator/applications.py`` (the same logic per GPU type: ``__init__`` 26-74,
``get_progress`` 163-168, ``get_grad_stats`` 229-246, ``get_throughput`` 247-292,
``get_max_local_bsz`` 310-324, the table 342-395) and ``cluster.py`` 227-303 (one-GPU
throughputs).  Sia's files have no licence: nothing of them is shipped, users pass a checkout
of its ``traces`` folder as ``root``.

Per application (``<app>/`` in the data folder):

* ``validation-<B>.csv``, one per validated total batch size B (samples), one row per epoch:
  cumulative ``progress`` (iterations at the initial batch size M0 equivalents) and
  ``iteration`` at the end of the epoch, the validation ``metric``, and the gradient
  statistics ``grad_sqr`` (|g|^2) and ``grad_var`` (Var g) during the epoch, normalised so
  that the noise scale is M0 grad_var / grad_sqr;
* ``placements.csv`` (Pollux) / ``placements-<type>.csv`` (Sia): the measured ``step_time`` (s
  per iteration) and its all-reduce part ``sync_time`` (s) per ``placement`` (a digit string,
  one digit per node = GPUs on that node) and per-GPU batch ``local_bsz`` (samples);
* ``scalability.csv`` / ``scalability-<type>.csv``: the same two times per (``num_nodes``,
  ``num_replicas``, ``local_bsz``) at larger scales, used only for interpolation.

The simulators derive: M0 = the smallest validated B, the largest validated B, the smallest
and largest measured ``local_bsz`` (Pollux forces 8 for yolov3; Sia forces 57 for deepspeech2
on ``rtx``), the epoch count from the table; progress(e) = 0 at e = 0, else the smallest
progress of epoch e - 1 over the validated sizes (a fixed progress level per epoch, whatever
batch size is used); (grad_sqr, grad_var) of epoch e linear in B between the two neighbouring
validated sizes; and (step_time, sync_time) at a placement: the placement is rotated to its
lexicographically smallest rotation (zeros dropped), then linear in ``local_bsz`` over that
placement's rows when it was measured, else a piecewise-linear (Delaunay) interpolation over
(num_nodes, num_replicas, local_bsz) of the placement rows averaged per such triple together
with the scalability rows, with num_nodes capped at 16.  Jobs in both simulators run until
progress(max_epochs) (no target metric is set in either code: the completion epoch is always
max_epochs - 1).

Placements are matched as tuples of GPU counts, not as the authors' decimal ids: the same for
every placement of at most 9 GPUs per node (all shipped and Sia types), and no aliasing above
(the authors' id of ``(11,)`` is that of ``(1, 1)``).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

import numpy as np

#: The six applications of both artifacts (Sia's ``gpt_pmp``, a pipeline job on two types
#: only, is not modelled).
APPLICATION_NAMES: tuple[str, ...] = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf",
                                      "yolov3")

#: Epochs a job trains for (Pollux ``simulator/applications.py`` 232-237, Sia
#: ``sia-simulator/applications.py`` 344-349 and the same per type).
MAX_EPOCHS: dict[str, int] = {"bert": 2, "cifar10": 100, "deepspeech2": 80, "imagenet": 90,
                              "ncf": 10, "yolov3": 50}

#: The Pollux flavour's override of the largest per-GPU batch (Pollux ``applications.py`` 237:
#: ``max_local_bsz=8`` for yolov3; Sia does not pass it).
POLLUX_MAX_LOCAL_BSZ: dict[str, int] = {"yolov3": 8}

#: The Sia flavour's override of the largest per-GPU batch per (application, GPU type) (Sia
#: ``applications.py`` 51-52: deepspeech2 on ``rtx``).
SIA_MAX_LOCAL_BSZ: dict[tuple[str, str], int] = {("deepspeech2", "rtx"): 57}

#: Sia's simulated checkpoint-restore delay per application, s (``rescale_time``, Sia
#: ``applications.py`` 56-69; 30 for any other name): charged at every start, restart and
#: migration before the job progresses.
SIA_RESTART_S: dict[str, float] = {"cifar10": 50, "imagenet": 250, "deepspeech2": 25,
                                   "yolov3": 80, "bert": 120, "ncf": 15}

#: The restart penalty Sia's *policy* assumes per application, s (``get_restart_penalty``,
#: Sia ``sia.py`` 23-35, matched on substrings of the job name: "deepspeech", "imagenet",
#: "cifar", "bert", "yolov3"; 30 for anything else, ncf included).  It differs from
#: :data:`SIA_RESTART_S` (cifar10 30 vs 50, yolov3 45 vs 80, ncf 30 vs 15).
SIA_POLICY_RESTART_S: dict[str, float] = {"deepspeech2": 25, "imagenet": 250, "cifar10": 30,
                                          "bert": 120, "yolov3": 45, "ncf": 30}

#: Sia's calibration: the simulated progress rate is divided by this per application ("real
#: runs are slower than the simulator"; Sia ``simulator_config.py`` 31-33, used at ``job.py``
#: 105 and 485; ``gpt_pmp`` 1.0 is not modelled here).
SIA_SLOWDOWN: dict[str, float] = {"cifar10": 1.8, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2,
                                  "deepspeech2": 1.2, "ncf": 1.5}

#: Pollux's simulated restart delay, s, the same for every job (Pollux ``simulator.py`` 163).
POLLUX_RESTART_S: float = 30

#: The node count above which the unmeasured-placement interpolation is clamped (Pollux
#: ``applications.py`` 223, Sia 284).
MAX_INTERPOLATED_NODES = 16

Flavour = Literal["pollux", "sia"]

_XS = ("num_nodes", "num_replicas", "local_bsz")
_YS = ("step_time", "sync_time")


class ProfileRangeError(ValueError):
    """A (placement, per-GPU batch) outside what an application's traces can interpolate."""


@dataclass(frozen=True, eq=False)
class ValidationCurve:
    """One ``validation-<B>.csv``: per epoch (row), the cumulative ``progress`` and
    ``iteration`` at its end, the validation ``metric`` and the gradient statistics
    ``grad_sqr``, ``grad_var`` during it, when training at total batch ``batch_size``."""

    batch_size: int
    progress: np.ndarray
    iteration: np.ndarray
    metric: np.ndarray
    grad_sqr: np.ndarray
    grad_var: np.ndarray


@dataclass(frozen=True, eq=False)
class StepProfile:
    """One GPU type's step-time measurements: the placement rows (placement as a tuple of GPU
    counts, its node and replica counts, ``local_bsz``, ``step_time``, ``sync_time``) and the
    scalability rows (``scale`` columns num_nodes, num_replicas, local_bsz, step_time,
    sync_time), row order as in the files."""

    placements: tuple[tuple[int, ...], ...]
    num_nodes: np.ndarray
    num_replicas: np.ndarray
    local_bsz: np.ndarray
    step_time: np.ndarray
    sync_time: np.ndarray
    scale: np.ndarray


def canonical_placement(placement: Sequence[int]) -> tuple[int, ...]:
    """GPUs per node with zeros dropped, rotated to the lexicographically smallest rotation
    (Pollux ``applications.py`` 206-209, Sia 249-252)."""
    counts = tuple(int(g) for g in placement if g)
    if not counts:
        raise ValueError(f"a placement needs at least one GPU, got {tuple(placement)}")
    if any(g < 0 for g in counts):
        raise ValueError(f"GPU counts must be non-negative, got {tuple(placement)}")
    return min(counts[i:] + counts[:i] for i in range(len(counts)))


@dataclass(frozen=True)
class Application:
    """One application on one GPU type, as one of the two simulators sees it (``flavour``).

    Batch sizes are in samples; times in seconds; progress in iterations at the initial batch
    size M0.  The numbers of the tables are in ``validation`` (by validated batch size) and
    ``profile``; build one with :func:`load_application`."""

    name: str
    gpu_type: str
    flavour: Flavour
    init_batch_size: int
    max_batch_size: int
    min_local_bsz: int
    max_local_bsz: int
    max_epochs: int
    validation: Mapping[int, ValidationCurve] = field(compare=False, repr=False)
    profile: StepProfile = field(compare=False, repr=False)
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, compare=False,
                                   repr=False)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the interpolation caches (rebuilt on demand)."""
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    # -- statistical side ----------------------------------------------------------------

    def validated_batch_sizes(self) -> tuple[int, ...]:
        """The validated total batch sizes, ascending."""
        return tuple(self.validation)

    def _neighbours(self, batch_size: float) -> tuple[int, int]:
        """The validated sizes lo <= B <= hi nearest to B (Pollux ``_validated_batch_sizes``
        50-62); equal when B is validated."""
        lower = upper = None
        for size in self.validation:
            if size <= batch_size:
                lower = size
            if size >= batch_size:
                upper = size
                break
        if lower is None or upper is None:
            raise ValueError(
                f"{self.name}: batch size {batch_size} is outside the validated range "
                f"[{self.init_batch_size}, {self.max_batch_size}]")
        return lower, upper

    def _check_epoch(self, epoch: int, high: int) -> None:
        if not 0 <= epoch <= high:
            raise ValueError(f"{self.name}: epoch {epoch} is outside [0, {high}]")

    def grad_stats(self, batch_size: float, epoch: int) -> tuple[float, float]:
        """(grad_sqr, grad_var) during ``epoch`` (0-based row) at total batch ``batch_size``:
        ((B - lo) x_hi + (hi - B) x_lo) / (hi - lo) between the neighbouring validated sizes
        (Pollux ``get_grad_stats`` 186-203)."""
        self._check_epoch(epoch, self.max_epochs - 1)
        lower, upper = self._neighbours(batch_size)
        low, high = self.validation[lower], self.validation[upper]
        lower_sqr, upper_sqr = float(low.grad_sqr[epoch]), float(high.grad_sqr[epoch])
        lower_var, upper_var = float(low.grad_var[epoch]), float(high.grad_var[epoch])
        if lower == upper:
            return lower_sqr, lower_var
        sqr = (((batch_size - lower) * upper_sqr + (upper - batch_size) * lower_sqr)
               / (upper - lower))
        var = (((batch_size - lower) * upper_var + (upper - batch_size) * lower_var)
               / (upper - lower))
        return float(sqr), float(var)

    def progress(self, epoch: int) -> float:
        """Progress at the end of ``epoch`` epochs: 0 at 0, else min over the validated sizes
        of their progress in row ``epoch - 1`` (Pollux ``get_progress`` 132-136)."""
        self._check_epoch(epoch, self.max_epochs)
        if epoch == 0:
            return 0.0
        return float(min(curve.progress[epoch - 1] for curve in self.validation.values()))

    @property
    def total_progress(self) -> float:
        """The progress a job must make to finish: ``progress(max_epochs)``."""
        return self.progress(self.max_epochs)

    @property
    def completion_epoch(self) -> int:
        """The epoch whose end completes the job: max_epochs - 1 (no target metric is set in
        either artifact, Pollux ``get_completion_epoch`` 138-150)."""
        return self.max_epochs - 1

    # -- system side ---------------------------------------------------------------------

    def _rows_of(self, placement: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
        """(sorted local_bsz, the [step_time, sync_time] rows in that order) of a measured
        canonical placement, None when it was not measured."""
        rows: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] | None = \
            self._cache.get("rows")
        if rows is None:
            rows = {}
            prof = self.profile
            index: dict[tuple[int, ...], list[int]] = {}
            for i, key in enumerate(prof.placements):
                index.setdefault(key, []).append(i)
            for key, ids in index.items():
                x = prof.local_bsz[ids].astype(float)
                y = np.column_stack([prof.step_time[ids], prof.sync_time[ids]])
                order = np.argsort(x, kind="mergesort")  # interp1d's own sort
                rows[key] = (x[order], y[order])
            self._cache["rows"] = rows
        return rows.get(placement)

    def _interpolator(self) -> Any:
        """The LinearNDInterpolator over (num_nodes, num_replicas, local_bsz): placement
        rows averaged per triple (sorted by it, as pandas' groupby) followed by the
        scalability rows (Pollux ``applications.py`` 219-224)."""
        interp = self._cache.get("nd")
        if interp is None:
            import pandas as pd
            from scipy.interpolate import LinearNDInterpolator

            prof = self.profile
            rows = pd.DataFrame({"num_nodes": prof.num_nodes, "num_replicas": prof.num_replicas,
                                 "local_bsz": prof.local_bsz, "step_time": prof.step_time,
                                 "sync_time": prof.sync_time})
            grouped = rows.groupby(list(_XS), as_index=False)[list(_YS)].mean()
            scale = pd.DataFrame(prof.scale, columns=[*_XS, *_YS])
            table = pd.concat([grouped, scale], ignore_index=True)
            interp = LinearNDInterpolator(table[list(_XS)].to_numpy(dtype=float),
                                          table[list(_YS)].to_numpy(dtype=float))
            self._cache["nd"] = interp
        return interp

    def _out_of_range(self, placement: tuple[int, ...], atomic_bsz: float,
                      why: str) -> ProfileRangeError:
        return ProfileRangeError(
            f"{self.name} on {self.gpu_type}: placement {placement} at per-GPU batch "
            f"{atomic_bsz} {why}")

    def step_times(self, placement: Sequence[int], atomic_bsz: float) -> tuple[float, float]:
        """(step_time, sync_time), s per iteration, on ``placement`` (GPUs per node) at
        per-GPU batch ``atomic_bsz`` (Pollux ``get_throughput`` 204-227, Sia 247-292).

        Measured placements: linear in ``local_bsz`` between the two measured neighbours
        (scipy's ``interp1d``: slope (y_hi - y_lo) / (x_hi - x_lo) times (b - x_lo) plus
        y_lo, also at a measured b); outside the measured batches the Pollux flavour raises
        :class:`ProfileRangeError` and the Sia flavour returns (-1.0, -1.0), as its code does.
        Unmeasured placements: ``LinearNDInterpolator`` at (min(nodes, 16), replicas, b);
        outside the convex hull of the table both flavours raise :class:`ProfileRangeError`
        (both codes fail an assertion there: Sia catches only the ``interp1d`` error)."""
        canon = canonical_placement(placement)
        key = (canon, float(atomic_bsz))
        times: tuple[float, float] | None = self._cache.get(key)
        if times is not None:
            return times
        bsz = float(atomic_bsz)
        measured = self._rows_of(canon)
        if measured is not None:
            x, y = measured
            if not x[0] <= bsz <= x[-1]:
                if self.flavour == "sia":
                    times = (-1.0, -1.0)
                    self._cache[key] = times
                    return times
                raise self._out_of_range(canon, atomic_bsz,
                                         f"is outside its measured batches [{x[0]:g}, "
                                         f"{x[-1]:g}]")
            if len(x) == 1:
                values = y[0]
            else:
                hi = min(max(int(np.searchsorted(x, bsz)), 1), len(x) - 1)
                lo = hi - 1
                slope = (y[hi] - y[lo]) / (x[hi] - x[lo])
                values = slope * (bsz - x[lo]) + y[lo]
        else:
            nodes = min(len(canon), MAX_INTERPOLATED_NODES)
            values = self._interpolator()([nodes, sum(canon), bsz])[0]
            if not np.all(np.isfinite(values)):
                raise self._out_of_range(
                    canon, atomic_bsz,
                    f"(interpolated at nodes={nodes}, replicas={sum(canon)}) is outside the "
                    "profiled placements and scalability rows")
        times = (float(values[0]), float(values[1]))
        self._cache[key] = times
        return times

    def max_local_bsz_on(self, placement: Sequence[int]) -> int:
        """The largest per-GPU batch measured on ``placement``: over its rows when measured,
        else over the scalability rows with num_nodes >= its nodes and num_replicas >= its
        replicas (Sia ``get_max_local_bsz`` 310-324; nodes not capped at 16).  Raises
        :class:`ProfileRangeError` where no row qualifies (Sia's code returns NaN there)."""
        canon = canonical_placement(placement)
        measured = self._rows_of(canon)
        if measured is not None:
            return int(measured[0][-1])
        scale = self.profile.scale
        mask = (scale[:, 0] >= len(canon)) & (scale[:, 1] >= sum(canon))
        if not mask.any():
            raise ProfileRangeError(
                f"{self.name} on {self.gpu_type}: no scalability row has at least "
                f"{len(canon)} nodes and {sum(canon)} replicas (placement {canon})")
        return int(scale[mask, 2].max())

    def measured_max_local_bsz(self, replicas: int) -> int | None:
        """The largest ``local_bsz`` of the placement rows on ``replicas`` GPUs (any node
        split), None when no row has that many: Sia's memory clamp of the per-GPU batch
        (Sia ``job.py`` 377-383)."""
        rows = self.profile.num_replicas == replicas
        if not rows.any():
            return None
        return int(self.profile.local_bsz[rows].max())

    def one_gpu_throughput(self) -> float:
        """Sia's one-GPU throughput x_t, samples/s: the largest ``local_bsz`` over the largest
        ``step_time`` of the one-replica placement rows (two maxima taken separately; Sia
        ``cluster.py`` 227-303)."""
        one = self.profile.num_replicas == 1
        return float(self.profile.local_bsz[one].max() / self.profile.step_time[one].max())


# -- loading -------------------------------------------------------------------------------


def _frozen(array: np.ndarray) -> np.ndarray:
    """``array`` made read-only: applications are cached and shared."""
    array.setflags(write=False)
    return array


def _read_csv(source: Traversable) -> Any:
    import pandas as pd

    return pd.read_csv(io.StringIO(source.read_text(encoding="utf-8")))


def _parse_placement(value: Any) -> tuple[int, ...]:
    return tuple(int(digit) for digit in str(value))


def _build(name: str, gpu_type: str, flavour: Flavour, folder: Traversable,
           placements_file: str, scalability_file: str) -> Application:
    if not folder.is_dir():
        raise FileNotFoundError(f"{name}: no trace folder at {folder}")
    curves: dict[int, ValidationCurve] = {}
    for entry in folder.iterdir():
        stem = entry.name
        if stem.startswith("validation-") and stem.endswith(".csv"):
            size = int(stem[len("validation-"):-len(".csv")])
            df = _read_csv(entry)
            curves[size] = ValidationCurve(
                size, *(_frozen(df[c].to_numpy(dtype=float, copy=True)) for c in
                        ("progress", "iteration", "metric", "grad_sqr", "grad_var")))
    if not curves:
        raise FileNotFoundError(f"{name}: no validation-*.csv in {folder}")
    validation = {size: curves[size] for size in sorted(curves)}
    placements = _read_csv(folder / placements_file)
    scalability = _read_csv(folder / scalability_file)
    keys = tuple(_parse_placement(p) for p in placements["placement"])
    profile = StepProfile(
        placements=keys,
        num_nodes=_frozen(np.array([len(k) for k in keys], dtype=np.int64)),
        num_replicas=_frozen(np.array([sum(k) for k in keys], dtype=np.int64)),
        local_bsz=_frozen(placements["local_bsz"].to_numpy(dtype=np.int64, copy=True)),
        step_time=_frozen(placements["step_time"].to_numpy(dtype=float, copy=True)),
        sync_time=_frozen(placements["sync_time"].to_numpy(dtype=float, copy=True)),
        scale=_frozen(scalability[[*_XS, *_YS]].to_numpy(dtype=float, copy=True)))
    max_local = int(profile.local_bsz.max())
    if flavour == "pollux":
        max_local = POLLUX_MAX_LOCAL_BSZ.get(name, max_local)
    else:
        max_local = SIA_MAX_LOCAL_BSZ.get((name, gpu_type), max_local)
    max_epochs = MAX_EPOCHS[name]
    short = [size for size, curve in validation.items() if len(curve.progress) < max_epochs]
    if short:
        raise ValueError(f"{name}: validation files {short} have fewer than {max_epochs} rows")
    app = Application(name=name, gpu_type=gpu_type, flavour=flavour,
                      init_batch_size=min(validation), max_batch_size=max(validation),
                      min_local_bsz=int(profile.local_bsz.min()), max_local_bsz=max_local,
                      max_epochs=max_epochs, validation=validation, profile=profile)
    if app.max_batch_size < app.min_local_bsz:  # Pollux applications.py 44
        raise ValueError(f"{name}: the largest batch is below the smallest per-GPU batch")
    return app


@functools.cache
def _load(name: str, gpu_type: str, flavour: Flavour, root: str | None) -> Application:
    if root is None:
        folder: Traversable = resources.files("schedlab").joinpath("data", "pollux", name)
        return _build(name, gpu_type, flavour, folder, "placements.csv", "scalability.csv")
    return _build(name, gpu_type, flavour, Path(root) / name,
                  f"placements-{gpu_type}.csv", f"scalability-{gpu_type}.csv")


def load_application(name: str, gpu_type: str = "aws", *, flavour: Flavour = "pollux",
                     root: Path | str | None = None) -> Application:
    """Application ``name`` on ``gpu_type`` as the ``flavour`` simulator sees it (cached).

    Without ``root``: the shipped Pollux traces (AWS g4dn.12xlarge, 4 T4 per node, type
    ``"aws"``; Sia's ``*-aws.csv`` files are the same bytes).  With ``root``: a folder in the
    Sia artifact's layout, ``<root>/<app>/placements-<type>.csv``, ``scalability-<type>.csv``
    and ``validation-*.csv`` (e.g. ``sia-simulator/traces`` of a checkout of
    siasosp23/artifacts), for any type it has (``dgx-ext``, ``rtx``, ``quad``, ...)."""
    if name not in APPLICATION_NAMES:
        raise ValueError(f"unknown application {name!r}; known: {', '.join(APPLICATION_NAMES)}")
    if flavour not in ("pollux", "sia"):
        raise ValueError(f"flavour must be 'pollux' or 'sia', got {flavour!r}")
    if root is None and gpu_type != "aws":
        raise ValueError(
            f"the profiles of GPU type {gpu_type!r} are not shipped (only Pollux's 'aws' "
            "ones are); pass root= a folder in the Sia artifact's layout "
            "(<root>/<app>/placements-<type>.csv, scalability-<type>.csv, validation-*.csv)")
    return _load(name, gpu_type, flavour, None if root is None else str(Path(root)))


__all__ = ["APPLICATION_NAMES", "MAX_EPOCHS", "MAX_INTERPOLATED_NODES", "POLLUX_MAX_LOCAL_BSZ",
           "POLLUX_RESTART_S", "SIA_MAX_LOCAL_BSZ", "SIA_POLICY_RESTART_S", "SIA_RESTART_S",
           "SIA_SLOWDOWN", "Application", "ProfileRangeError", "StepProfile", "ValidationCurve",
           "canonical_placement", "load_application"]
