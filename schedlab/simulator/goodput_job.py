r"""A goodput job as Pollux's and Sia's simulators advance it (docs/goodput.md, "The job").

The job trains an application whose ground truth is a measured profile
(:class:`~schedlab.world.applications.Application`): step times per placement and per-GPU
batch, gradient statistics per epoch and batch size.  It keeps

* ``progress``: efficiency-weighted iterations at the initial batch size M0; epoch e ends at
  the fixed level ``progress(e + 1)`` and the job is done after ``completion_epoch``;
* its placement: a type and a tuple of GPUs per node, and the batch it runs, an atomic (per
  GPU) batch m with s extra accumulation steps;
* what it has *observed*: one profile point (nodes, replicas, m) -> (step, sync) s per type,
  the fitted throughput model of each type and the latest gradient statistics.  A policy
  sees only these, never the profile tables.

**One step of ``seconds``** (Pollux ``simulator.py`` 100-157, Sia ``job.py`` 414-522):
a pending checkpoint-restore delay is paid first (GPUs held, no progress); then, until the
time is used or the job is done, with K replicas and M = K m (s + 1)::

    (sqr, var) = true gradient statistics at (M, epoch);  gain = (var + sqr) / (var/scale + sqr)
    (step, sync) = true step times of (placement, m);     observe them (refit on a new point)
    rate = gain / (step + (step - sync) s)  [x 1/slowdown in Sia's world]   progress per s
    the epoch's end reached within the time: advance to it in round((next - progress) / rate)
    whole seconds (the job finishes there after its last epoch), else progress += rate x time
    re-choose (m, s) for the placement

**The batch** (Pollux ``simulator.py`` 64-83, Sia ``job.py`` 317-385): the fixed target batch
when batch tuning is off or the job has one (NCF: 32768); max(M0, min_local K) before the
job has a model; else the best of :meth:`~schedlab.world.goodput.GoodputModel.optimize`
up to the application's maximum.  Sia then caps m at the largest per-GPU batch measured for
K replicas (memory); both cap m at max_batch / (K (s + 1)).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from schedlab.world.applications import (
    POLLUX_RESTART_S,
    SIA_RESTART_S,
    SIA_SLOWDOWN,
    Application,
)
from schedlab.world.goodput import GoodputModel, GradParams, PerfParams
from schedlab.world.goodput_fit import fit_perf_params

#: Tolerance of the batch split's ceilings (both codes).
EPS = 1e-8
#: Sia's fit tolerance (``sia-simulator/goodput.py`` 200-201); Pollux uses scipy's default.
SIA_FIT_TOL = 1e-5


@functools.lru_cache(maxsize=4096)
def _fit(points: tuple[tuple[tuple[int, int, int], tuple[float, float]], ...],
         tol: float | None) -> PerfParams:
    """The throughput fit of observed points ((nodes, replicas, m), (step, sync)) in the
    order observed; jobs of one application observe the same points, so the fit is kept
    (the same inputs give the same parameters)."""
    keys = np.array([key for key, _ in points], dtype=float)
    times = np.array([value for _, value in points], dtype=float)
    return fit_perf_params(keys[:, 0], keys[:, 1], keys[:, 2], times[:, 0] - times[:, 1],
                           times[:, 0], tol=tol)


@dataclass(frozen=True)
class GoodputWorld:
    """How a simulator of goodput jobs charges restarts and advances jobs: each authors'
    simulator has its own rules, and every policy in a run meets the same ones.

    * ``name``: ``pollux`` (the OSDI'21 artifact's simulator) or ``sia`` (SOSP'23's);
    * ``restart``: ``node_ids``: any change of the job's node-id list restarts it (Pollux
      ``simulator.py`` 241-250); ``shape``: a change of GPU type, or of the per-node GPU
      counts on one type, restarts it, a move to other nodes of the same shape is free (Sia
      ``job.py`` 524-542, ``cluster.py`` 190-215);
    * ``restart_s``: the checkpoint-restore delay, one number for every job (Pollux: 30 s,
      ``simulator.py`` 163) or None for the per-application delays of Sia's
      ``applications.py``; a first start pays it too in both;
    * ``calibrate``: progress x 1/slowdown per application (Sia ``simulator_config.py``
      31-33: "real runs are slower than the simulator");
    * ``memory_cap``: cap the per-GPU batch at the largest measured for the replica count
      (Sia ``job.py`` 372-379);
    * ``fit_tol``: the throughput fit's tolerance (None: scipy's default);
    * ``squeeze_nodes``: a placement over more nodes than the type has profiled is squeezed
      into that many (Sia ``cluster.py`` 198-209).
    """

    name: str
    restart: str
    restart_s: float | None
    calibrate: bool
    memory_cap: bool
    fit_tol: float | None
    squeeze_nodes: bool

    def restart_delay(self, app: str) -> float:
        """Seconds of checkpoint-restore a (re)start of an ``app`` job costs."""
        if self.restart_s is not None:
            return self.restart_s
        return float(SIA_RESTART_S.get(app, 30))

    def slowdown(self, app: str) -> float:
        """The calibration divisor of ``app``'s true progress rate (1 when not calibrating)."""
        return float(SIA_SLOWDOWN.get(app, 1.0)) if self.calibrate else 1.0


POLLUX_WORLD = GoodputWorld(name="pollux", restart="node_ids", restart_s=POLLUX_RESTART_S,
                            calibrate=False, memory_cap=False, fit_tol=None,
                            squeeze_nodes=False)
SIA_WORLD = GoodputWorld(name="sia", restart="shape", restart_s=None, calibrate=True,
                         memory_cap=True, fit_tol=SIA_FIT_TOL, squeeze_nodes=True)
WORLDS: dict[str, GoodputWorld] = {"pollux": POLLUX_WORLD, "sia": SIA_WORLD}


@dataclass
class GoodputJob:
    """The simulator's state of one goodput job (module docstring).

    ``apps`` = the application's ground truth per GPU type; ``target_batch_size`` the
    batch the job is held to when ``tune_bsz`` is off (and NCF's fixed 32768 in both
    codes); ``request_batch_size`` the trace's batch request, which Sia's policy-side
    goodput uses as its maximum (its ``job.py`` 249).  Times in s, GPU-seconds in
    ``attained_service``.
    """

    name: str
    apps: Mapping[str, Application]
    submission_time: float
    world: GoodputWorld
    target_batch_size: int | None = None
    request_batch_size: int | None = None
    target_replicas: int | None = None
    tune_bsz: bool = True
    category: str = "adaptive"
    current_type: str | None = None
    placement: tuple[int, ...] = ()
    atomic_bsz: int = 0
    accum_steps: int = 0
    progress: float = 0.0
    epoch: int = 0
    current_time: float = 0.0
    rescale_time: float = 0.0
    attained_service: float = 0.0
    wasted_gpu_seconds: float = 0.0
    delay_s: float = 0.0
    num_restarts: int | None = None
    start_time: float | None = None
    completion_time: float | None = None
    profiles: dict[str, dict[tuple[int, int, int], tuple[float, float]]] = field(
        default_factory=dict)
    perf_params: dict[str, PerfParams | None] = field(default_factory=dict)
    grad_params: GradParams | None = None
    time_on: dict[str, float] = field(default_factory=dict)

    @property
    def app_name(self) -> str:
        """The application's name."""
        return next(iter(self.apps.values())).name

    @property
    def reference_app(self) -> Application:
        """The application on the first type (its progress levels do not depend on type)."""
        return next(iter(self.apps.values()))

    @property
    def total_progress(self) -> float:
        """Progress at which the job is done."""
        return self.reference_app.total_progress

    def max_profiled_replicas(self, gpu_type: str) -> int:
        """The largest replica count among the job's observed profile points on a type."""
        return max((key[1] for key in self.profiles.get(gpu_type, {})), default=0)

    def model(self, gpu_type: str) -> GoodputModel | None:
        """The fitted goodput model of the job on ``gpu_type`` (None before it ran there)."""
        perf = self.perf_params.get(gpu_type)
        if perf is None or self.grad_params is None:
            return None
        return GoodputModel(perf, self.grad_params, self.apps[gpu_type].init_batch_size)

    # ------------------------------------------------------------------ the batch

    def update_local_bsz(self) -> None:
        """Choose (m, s) for the current placement (module docstring, "The batch")."""
        assert self.current_type is not None
        app = self.apps[self.current_type]
        placement = tuple(p for p in self.placement if p)
        nodes, replicas = len(placement), sum(placement)
        sia = self.world.memory_cap
        batch_size = None if (sia and self.tune_bsz) else self.target_batch_size
        max_local = app.max_local_bsz_on(placement) if sia else app.max_local_bsz
        model = self.model(self.current_type)
        if batch_size is None and model is None:
            batch_size = max(app.init_batch_size, app.min_local_bsz * replicas)
        if batch_size is None:
            assert model is not None
            choice = model.optimize(nodes, replicas, app.max_batch_size,
                                    (app.min_local_bsz, max_local))
            self.atomic_bsz, self.accum_steps = choice.atomic_bsz, choice.accum_steps
        else:
            local = math.ceil(batch_size / replicas - EPS)
            self.accum_steps = math.ceil(local / max_local - EPS) - 1
            if replicas == 1 and batch_size > app.init_batch_size:
                self.accum_steps = max(1, self.accum_steps)
            self.atomic_bsz = math.ceil(local / (self.accum_steps + 1) - EPS)
        if sia:
            measured = app.measured_max_local_bsz(replicas)
            if measured is not None:
                self.atomic_bsz = int(min(self.atomic_bsz, measured))
        count = replicas * (self.accum_steps + 1)
        self.atomic_bsz = min(self.atomic_bsz, int(app.max_batch_size / count))

    def observe(self, nodes: int, replicas: int, atomic_bsz: int, step_time: float,
                sync_time: float, grad: GradParams) -> None:
        """Record the latest gradient statistics and, on a new profile point, refit the
        throughput model of the current type (Pollux ``simulator.py`` 85-98)."""
        assert self.current_type is not None
        self.grad_params = grad
        profile = self.profiles.setdefault(self.current_type, {})
        key = (nodes, replicas, atomic_bsz)
        if key in profile:
            return
        profile[key] = (step_time, sync_time)
        self.perf_params[self.current_type] = _fit(tuple(profile.items()), self.world.fit_tol)

    # ------------------------------------------------------------------ time

    def step(self, seconds: float) -> None:
        """Advance the job by ``seconds`` (module docstring, "One step")."""
        if self.completion_time is not None:
            self.current_time += seconds
            return
        if not self.placement:
            self.current_time += seconds
            return
        gpus = sum(self.placement)
        assert self.current_type is not None
        delay = min(self.rescale_time, seconds)
        self.current_time += delay
        self.attained_service += delay * gpus
        self.wasted_gpu_seconds += delay * gpus
        self.delay_s += delay
        self.time_on[self.current_type] = self.time_on.get(self.current_type, 0.0) + seconds
        self.rescale_time -= delay
        seconds -= delay
        app = self.apps[self.current_type]
        slowdown = self.world.slowdown(self.app_name)
        while seconds > 0 and self.completion_time is None:
            placement = tuple(p for p in self.placement if p)
            nodes, replicas = len(placement), sum(placement)
            batch_size = replicas * self.atomic_bsz * (self.accum_steps + 1)
            scale = batch_size / app.init_batch_size
            sqr, var = app.grad_stats(batch_size, self.epoch)
            gain = (var + sqr) / (var / scale + sqr)
            step_time, sync_time = app.step_times(placement, self.atomic_bsz)
            self.observe(nodes, replicas, self.atomic_bsz, step_time, sync_time,
                         GradParams(sqr=sqr, var=var))
            total_time = step_time + (step_time - sync_time) * self.accum_steps
            rate = gain / total_time / slowdown
            next_progress = app.progress(self.epoch + 1)
            if self.progress + rate * seconds < next_progress:
                self.progress += rate * seconds
                self.current_time += seconds
                self.attained_service += seconds * gpus
                seconds = 0
            else:
                self.epoch += 1
                delta = float(round((next_progress - self.progress) / rate))
                if self.epoch > app.completion_epoch:
                    self.completion_time = self.current_time + delta
                self.progress = next_progress
                self.current_time += delta
                self.attained_service += delta * gpus
                seconds -= delta
            self.update_local_bsz()
        self.current_time += seconds

    def fixed_rate(self, gpu_type: str, gpus_per_node: int) -> float:
        """Progress per second of a fixed-batch job on ``target_replicas`` GPUs of
        ``gpu_type`` packed on whole nodes, at its current epoch's true gradient statistics
        (what a policy of fixed gangs sees as the job's throughput; 0 when the profile
        does not cover the placement)."""
        app = self.apps[gpu_type]
        replicas = self.target_replicas or 1
        whole, rest = divmod(replicas, gpus_per_node)
        placement = (gpus_per_node,) * whole + ((rest,) if rest else ())
        saved = (self.current_type, self.placement, self.atomic_bsz, self.accum_steps)
        self.current_type, self.placement = gpu_type, placement
        try:
            self.update_local_bsz()
            batch = replicas * self.atomic_bsz * (self.accum_steps + 1)
            sqr, var = app.grad_stats(batch, min(self.epoch, app.max_epochs - 1))
            scale = batch / app.init_batch_size
            step, sync = app.step_times(placement, self.atomic_bsz)
        except ValueError:
            return 0.0
        finally:
            self.current_type, self.placement, self.atomic_bsz, self.accum_steps = saved
        gain = (var + sqr) / (var / scale + sqr)
        total = step + (step - sync) * self.accum_steps
        return float(gain / total / self.world.slowdown(self.app_name)) if total > 0 else 0.0

    # ------------------------------------------------------------------ moves

    def start(self, gpu_type: str, placement: tuple[int, ...]) -> None:
        """Run on ``placement`` (GPUs per node) of ``gpu_type``: pay the restart delay and
        count a restart (the first start counts none)."""
        self.current_type = gpu_type
        self.placement = placement
        self.update_local_bsz()
        self.rescale_time = self.world.restart_delay(self.app_name)
        self.num_restarts = 0 if self.num_restarts is None else self.num_restarts + 1
        if self.start_time is None:
            self.start_time = self.current_time

    def suspend(self) -> None:
        """Give up every GPU (not a restart)."""
        self.placement = ()
        self.atomic_bsz = 0
