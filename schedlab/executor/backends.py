"""Where slot workers run: local processes (default) or Ray actors, behind one interface.

The replay loop (:mod:`schedlab.executor.replay`) talks to a :class:`Backend` only:

* ``start(slots, devices)`` - one persistent worker per slot;
* ``submit(slot, order)`` - hand the slot's worker a segment order;
* ``poll(timeout)`` - the events that arrived: ``("result", slot, dict)``, ``("progress",
  slot, tuple)``, ``("died", slot, reason)`` (the worker process ended or the actor died),
  ``("error", slot, text)`` (the worker raised while running an order: a bug, or a gang's
  collective failing because a peer died; the replay tells them apart) and
  ``("ready", slot, pid)`` (a replacement worker has started);
* ``restart(slot)`` - replace the slot's worker with a fresh one, *without waiting* for it:
  the old worker is killed, the new one is launched and ``restart`` returns at once; the new
  worker imports torch and warms up on its own (seconds), then reports ``ready`` through
  ``poll``.  Until then ``ready(slot)`` is False and orders submitted to the slot wait for
  it (in the pipe, or in the actor's queue), so the replay loop keeps polling the other
  slots instead of blocking past their deadlines;
* ``ready(slot)`` - the slot's worker has started and runs orders as they come;
* ``pid(slot)`` - the worker's process id; ``gang_store(world)`` - a store the replay hosts
  for a gang's process group; ``close()``.

A replacement that dies before it is ready is reported as ``died`` again (the replay then
restarts it again); :data:`MAX_START_FAILURES` such deaths in a row, or a start longer than
:data:`READY_TIMEOUT_S`, raise :class:`WorkerFailed` (a broken environment, not a fault).

:class:`LocalBackend` starts ``spawn`` children (a ``forkserver`` child with torch
preloaded starts faster, but gloo process groups hung intermittently in such children here),
pinned to one core set each where the platform allows, that ignore SIGINT, so Ctrl-C reaches
only the replay, which then stops them.  :class:`RayBackend` starts one actor per slot
declaring ``num_cpus = threads`` and ``num_gpus = 1`` for a CUDA slot, so Ray places it on a
node with that resource; it connects with ``ray.init(address=...)`` when an address is
given, else starts a local Ray.
"""

from __future__ import annotations

import datetime
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from abc import ABC, abstractmethod
from typing import Any

from schedlab.errors import InputError
from schedlab.executor.plan import Slot, slot_name

log = logging.getLogger(__name__)

Event = tuple[str, Slot, Any]

#: Seconds a new worker may take to import torch and report ready.
READY_TIMEOUT_S = 120.0
#: Replacement workers of one slot that may die in a row before they are ready.
MAX_START_FAILURES = 3


class Backend(ABC):
    """One persistent worker per device slot."""

    name = "backend"

    @property
    def started(self) -> bool:
        """Workers are running (a replay handed a started backend leaves it running)."""
        return bool(getattr(self, "_started", False))

    @abstractmethod
    def start(self, slots: list[Slot], warm: list[str]) -> None:
        """Start one worker per slot, each warmed up on the job types ``warm``."""

    @abstractmethod
    def submit(self, slot: Slot, order: dict[str, Any]) -> None:
        """Hand ``order`` to the slot's worker."""

    @abstractmethod
    def poll(self, timeout: float) -> list[Event]:
        """Events that arrive within ``timeout`` seconds (as soon as one does)."""

    @abstractmethod
    def restart(self, slot: Slot) -> None:
        """Replace the slot's worker (dead or stuck) with a fresh one; returns without
        waiting for it to start (``poll`` reports ``ready`` when it has)."""

    def ready(self, slot: Slot) -> bool:
        """The slot's worker has started (a backend whose ``restart`` waits: always)."""
        return True

    @abstractmethod
    def pid(self, slot: Slot) -> int:
        """Process id of the slot's worker."""

    def gang_store(self, world: int) -> tuple[Any, str, int]:
        """A ``torch.distributed.TCPStore`` hosted by the replay for one gang segment of
        ``world`` ranks, with the address and port the workers reach it at."""
        from torch.distributed import TCPStore

        host = self.store_host()
        store = TCPStore(host, 0, world + 1, is_master=True, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=60))
        return store, host, int(store.port)

    def store_host(self) -> str:
        """Address of this (the replay's) machine as the workers see it."""
        return "127.0.0.1"

    @abstractmethod
    def close(self) -> None:
        """Stop every worker."""


# ------------------------------------------------------------------------------ local


def cpu_cores(index: int, count: int, threads: int) -> list[int] | None:
    """Cores of local CPU worker ``index`` of ``count`` (``threads`` each, as the profiler
    pins its CPU devices), or None when this process may not use that many cores."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < count * threads:
        return None
    return allowed[index * threads:(index + 1) * threads]


def _serve(conn: multiprocessing.connection.Connection, threads: int, warm: list[str],
           cores: list[int] | None) -> None:
    """Worker process main loop: run orders from ``conn`` until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from schedlab.executor.worker import SlotWorker

    worker = SlotWorker(threads, cores)
    worker.warm_up(warm)
    conn.send(("ready", os.getpid()))

    def progress(steps: int, wall: float, saved: int | None, saved_wall: float | None) -> None:
        conn.send(("progress", (steps, wall, saved, saved_wall)))

    gone = (EOFError, BrokenPipeError, ConnectionResetError)  # the replay has ended
    while True:
        try:
            message = conn.recv()
        except gone:
            return
        if message[0] == "stop":
            return
        try:
            result = worker.run(message[1], progress)
        except gone:
            return
        except Exception as exc:  # reported to the replay, which fails
            try:
                conn.send(("error", f"{type(exc).__name__}: {exc}"))
            except gone:
                return
            continue
        try:
            conn.send(("result", result))
        except gone:
            return


class LocalBackend(Backend):
    """Workers as local ``spawn`` processes, one per slot."""

    name = "local"

    def __init__(self, threads: int = 1, devices: dict[Slot, str] | None = None) -> None:
        self.threads = threads
        self.devices = devices or {}
        self.warm: list[str] = []
        self._cores: dict[Slot, list[int] | None] = {}
        self._context = multiprocessing.get_context("spawn")  # never fork a torch process
        self._procs: dict[Slot, Any] = {}
        self._conns: dict[Slot, multiprocessing.connection.Connection] = {}
        #: slots whose worker has not yet said ``ready``: monotonic time it was launched
        self._starting: dict[Slot, float] = {}
        self._start_failures: dict[Slot, int] = {}
        #: killed workers not yet reaped (joined without waiting on later polls)
        self._dying: list[Any] = []

    def _spawn(self, slot: Slot) -> None:
        """Launch the slot's worker; it reports ``ready`` once warm (not waited for)."""
        parent, child = self._context.Pipe()
        proc = self._context.Process(target=_serve,
                                     args=(child, self.threads, self.warm,
                                           self._cores.get(slot)),
                                     name=f"schedlab-slot-{slot_name(slot)}", daemon=True)
        proc.start()
        child.close()
        self._procs[slot] = proc
        self._conns[slot] = parent
        self._starting[slot] = time.monotonic()

    def start(self, slots: list[Slot], warm: list[str]) -> None:
        self.warm = list(warm)
        cpu = [slot for slot in slots if not self.devices.get(slot, "cpu").startswith("cuda")]
        pinned = [cpu_cores(i, len(cpu), self.threads) for i in range(len(cpu))]
        if None in pinned:
            log.warning("%d CPU worker(s) x %d thread(s) exceed the cores this process may "
                        "use: not pinning", len(cpu), self.threads)
        self._cores = dict(zip(cpu, pinned, strict=True))
        for slot in slots:
            self._spawn(slot)
        for slot in slots:
            self._wait_ready(slot)
        self._started = True

    def _wait_ready(self, slot: Slot) -> None:
        """Block until the slot's worker has imported torch (so the replay clock starts
        with warm workers); only :meth:`start` waits, before the clock starts."""
        conn = self._conns[slot]
        left = READY_TIMEOUT_S - (time.monotonic() - self._starting[slot])
        if not conn.poll(max(left, 0.0)):
            raise WorkerFailed(f"worker {slot_name(slot)} did not start in "
                               f"{READY_TIMEOUT_S:g} s")
        try:
            tag, _ = conn.recv()
        except EOFError:
            raise WorkerFailed(f"worker {slot_name(slot)} exited while starting") from None
        if tag != "ready":
            raise WorkerFailed(f"worker {slot_name(slot)}: unexpected first message {tag!r}")
        del self._starting[slot]

    def ready(self, slot: Slot) -> bool:
        return slot in self._procs and slot not in self._starting

    def submit(self, slot: Slot, order: dict[str, Any]) -> None:
        try:
            self._conns[slot].send(("run", order))
        except (BrokenPipeError, OSError):
            log.warning("worker of %s is gone; the order will be reported as a fault",
                        slot_name(slot))

    def poll(self, timeout: float) -> list[Event]:
        self._reap()
        self._check_start_time()
        by_handle: dict[Any, tuple[str, Slot]] = {}
        for slot, conn in self._conns.items():
            by_handle[conn] = ("conn", slot)
            by_handle[self._procs[slot].sentinel] = ("proc", slot)
        if self._starting:  # wake in time to notice a start past its limit
            timeout = min(timeout, 1.0)
        ready = multiprocessing.connection.wait(list(by_handle), max(timeout, 0.0))
        events: list[Event] = []
        dead: set[Slot] = set()
        for handle in ready:
            kind, slot = by_handle[handle]
            if kind == "conn":
                conn = self._conns[slot]
                try:
                    while conn.poll():
                        tag, payload = conn.recv()
                        if tag == "ready":
                            self._starting.pop(slot, None)
                            self._start_failures.pop(slot, None)
                        events.append((tag, slot, payload))
                except (EOFError, OSError):
                    dead.add(slot)
            else:
                dead.add(slot)
        for slot in sorted(dead):
            proc = self._procs[slot]
            proc.join(timeout=1.0)
            if proc.is_alive():
                continue
            reason = f"exit code {proc.exitcode}"
            if slot in self._starting:
                failures = self._start_failures.get(slot, 0) + 1
                self._start_failures[slot] = failures
                if failures >= MAX_START_FAILURES:
                    raise WorkerFailed(f"worker {slot_name(slot)} exited while starting "
                                       f"{failures} times in a row ({reason})")
                reason += " while starting"
            events.append(("died", slot, reason))
        return events

    def _check_start_time(self) -> None:
        """A worker that has not said ``ready`` within :data:`READY_TIMEOUT_S` cannot start
        here (torch import stuck, no memory): the replay stops with an error."""
        now = time.monotonic()
        for slot, since in self._starting.items():
            if now - since > READY_TIMEOUT_S:
                raise WorkerFailed(f"worker {slot_name(slot)} did not start in "
                                   f"{READY_TIMEOUT_S:g} s")

    def restart(self, slot: Slot) -> None:
        """SIGKILL the slot's worker (it is dead or stuck, so nothing is lost by not asking
        it to stop; it is reaped on later polls) and launch a fresh one; returns at once."""
        proc = self._procs.pop(slot, None)
        conn = self._conns.pop(slot, None)
        self._starting.pop(slot, None)
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            self._dying.append(proc)
        self._spawn(slot)

    def _reap(self) -> None:
        """Join killed workers that have exited (without waiting for the others)."""
        self._dying = [proc for proc in self._dying if proc.is_alive()]

    def pid(self, slot: Slot) -> int:
        return int(self._procs[slot].pid)

    def _stop(self, slot: Slot) -> None:
        proc = self._procs.pop(slot, None)
        conn = self._conns.pop(slot, None)
        if conn is not None:
            try:
                conn.send(("stop", None))
            except (BrokenPipeError, OSError):
                pass
            conn.close()
        if proc is not None:
            proc.join(timeout=0.5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)

    def close(self) -> None:
        for slot in list(self._procs):
            self._stop(slot)
        self._starting.clear()
        for proc in self._dying:
            proc.join(timeout=5.0)
        self._dying.clear()
        self._started = False


class WorkerFailed(Exception):
    """A worker raised while running an order, or cannot start (a bug or a bad environment,
    not a fault)."""


# ------------------------------------------------------------------------------ ray


class RayBackend(Backend):
    """Workers as Ray actors, one per slot, each declaring its CPUs and GPU."""

    name = "ray"

    def __init__(self, threads: int = 1, address: str | None = None,
                 devices: dict[Slot, str] | None = None, num_cpus: int | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise InputError("the Ray backend needs Ray: pip install 'schedlab[ray]'",
                             field="--backend") from None
        self._ray = ray
        self.threads = threads
        self.devices = devices or {}
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=num_cpus, log_to_driver=False, include_dashboard=False)
        self._actors: dict[Slot, Any] = {}
        self._pids: dict[Slot, int] = {}
        self._hosts: dict[Slot, str] = {}
        self._refs: dict[Any, Slot] = {}
        #: warm-up call of a starting actor -> its slot; the slot's ``where`` call
        self._starting: dict[Any, Slot] = {}
        self._start_times: dict[Slot, float] = {}
        self._start_failures: dict[Slot, int] = {}
        self._where: dict[Slot, Any] = {}
        self.warm: list[str] = []
        self._actor_class: Any = ray.remote(_RayWorker)

    def _spawn(self, slot: Slot) -> None:
        """Create the slot's actor and queue its warm-up; not waited for (the actor runs
        calls in order, so a ``run`` submitted now starts after the warm-up)."""
        gpus = 1 if self.devices.get(slot, "cpu").startswith("cuda") else 0
        actor: Any = self._actor_class.options(num_cpus=self.threads, num_gpus=gpus,
                                          max_restarts=0).remote(self.threads)
        self._actors[slot] = actor
        self._pids.pop(slot, None)
        self._where[slot] = actor.where.remote()
        self._starting[actor.warm_up.remote(self.warm)] = slot
        self._start_times[slot] = time.monotonic()

    def _mark_ready(self, slot: Slot) -> None:
        pid, host = self._ray.get(self._where[slot])
        self._pids[slot] = int(pid)
        self._hosts[slot] = str(host)
        self._start_times.pop(slot, None)
        self._start_failures.pop(slot, None)

    def start(self, slots: list[Slot], warm: list[str]) -> None:
        self.warm = list(warm)
        for slot in slots:
            self._spawn(slot)
        for ref, slot in list(self._starting.items()):
            try:
                self._ray.get(ref, timeout=READY_TIMEOUT_S)
            except self._ray.exceptions.GetTimeoutError:
                raise WorkerFailed(f"worker {slot_name(slot)} did not start in "
                                   f"{READY_TIMEOUT_S:g} s") from None
            del self._starting[ref]
            self._mark_ready(slot)
        self._started = True

    def ready(self, slot: Slot) -> bool:
        return slot in self._actors and slot not in self._start_times

    def submit(self, slot: Slot, order: dict[str, Any]) -> None:
        ref = self._actors[slot].run.remote(order)
        self._refs[ref] = slot

    def poll(self, timeout: float) -> list[Event]:
        now = time.monotonic()
        for slot, since in self._start_times.items():
            if now - since > READY_TIMEOUT_S:
                raise WorkerFailed(f"worker {slot_name(slot)} did not start in "
                                   f"{READY_TIMEOUT_S:g} s")
        waiting = list(self._refs) + list(self._starting)
        if not waiting:
            time.sleep(max(timeout, 0.0))
            return []
        ready, _ = self._ray.wait(waiting, num_returns=1, timeout=max(timeout, 0.0))
        events: list[Event] = []
        for ref in ready:
            if ref in self._starting:
                slot = self._starting.pop(ref)
                try:
                    self._ray.get(ref)
                except self._ray.exceptions.RayActorError as exc:
                    failures = self._start_failures.get(slot, 0) + 1
                    self._start_failures[slot] = failures
                    if failures >= MAX_START_FAILURES:
                        raise WorkerFailed(f"worker {slot_name(slot)} died while starting "
                                           f"{failures} times in a row") from None
                    events.append(("died", slot, f"actor died while starting: "
                                                 f"{type(exc).__name__}"))
                    continue
                self._mark_ready(slot)
                events.append(("ready", slot, self._pids[slot]))
                continue
            slot = self._refs.pop(ref)
            try:
                events.append(("result", slot, self._ray.get(ref)))
            except self._ray.exceptions.RayActorError as exc:
                events.append(("died", slot, f"actor died: {type(exc).__name__}"))
            except self._ray.exceptions.RayTaskError as exc:
                events.append(("error", slot, str(exc)))
        return events

    def restart(self, slot: Slot) -> None:
        """Kill the slot's actor and create a fresh one; returns at once (``poll`` reports
        ``ready`` after its warm-up)."""
        actor = self._actors.pop(slot, None)
        if actor is not None:
            self._ray.kill(actor, no_restart=True)
        for refs in (self._refs, self._starting):
            for ref, owner in list(refs.items()):
                if owner == slot:
                    del refs[ref]
        self._spawn(slot)

    def pid(self, slot: Slot) -> int:
        """The actor's process id (waits for a starting actor to exist: hooks only)."""
        if slot not in self._pids:
            pid, _ = self._ray.get(self._where[slot])
            return int(pid)
        return self._pids[slot]

    def store_host(self) -> str:
        return str(self._ray.util.get_node_ip_address())

    def close(self) -> None:
        for actor in self._actors.values():
            self._ray.kill(actor, no_restart=True)
        self._actors.clear()
        self._refs.clear()
        self._starting.clear()
        self._start_times.clear()
        self._started = False


class _RayWorker:
    """The Ray actor: a :class:`~schedlab.executor.worker.SlotWorker` in the actor process."""

    def __init__(self, threads: int) -> None:
        from schedlab.executor.worker import SlotWorker

        self.worker = SlotWorker(threads)

    def where(self) -> tuple[int, str]:
        import ray

        return os.getpid(), ray.util.get_node_ip_address()

    def warm_up(self, specs: list[str]) -> float:
        return self.worker.warm_up(specs)

    def run(self, order: dict[str, Any]) -> dict[str, Any]:
        return self.worker.run(order)


def make_backend(name: str | Backend, *, threads: int, address: str | None = None,
                 devices: dict[Slot, str] | None = None) -> Backend:
    """``local`` or ``ray``; a :class:`Backend` object is used as it is."""
    if isinstance(name, Backend):
        return name
    if name == "local":
        return LocalBackend(threads, devices)
    if name == "ray":
        return RayBackend(threads, address, devices)
    raise InputError(f"unknown backend {name!r}; known: local, ray", field="--backend")
