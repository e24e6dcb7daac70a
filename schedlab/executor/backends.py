"""Where slot workers run: local processes (default) or Ray actors, behind one interface.

The replay loop (:mod:`schedlab.executor.replay`) talks to a :class:`Backend` only:

* ``start(slots, devices)`` - one persistent worker per slot;
* ``submit(slot, order)`` - hand the slot's worker a segment order;
* ``poll(timeout)`` - the events that arrived: ``("result", slot, dict)``, ``("progress",
  slot, tuple)`` and ``("died", slot, reason)`` (the worker process ended or the actor died);
* ``restart(slot)`` - replace the slot's worker with a fresh one;
* ``pid(slot)`` - the worker's process id; ``gang_store(world)`` - a store the replay hosts
  for a gang's process group; ``close()``.

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

#: Seconds a new local worker may take to import torch and report ready.
READY_TIMEOUT_S = 120.0


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
        """Replace the slot's worker (dead or stuck) with a fresh one."""

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

    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message[0] == "stop":
            return
        try:
            result = worker.run(message[1], progress)
        except Exception as exc:  # reported to the replay, which fails
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        conn.send(("result", result))


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

    def _spawn(self, slot: Slot) -> None:
        parent, child = self._context.Pipe()
        proc = self._context.Process(target=_serve,
                                     args=(child, self.threads, self.warm,
                                           self._cores.get(slot)),
                                     name=f"schedlab-slot-{slot_name(slot)}", daemon=True)
        proc.start()
        child.close()
        self._procs[slot] = proc
        self._conns[slot] = parent

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
        with warm workers)."""
        conn = self._conns[slot]
        if not conn.poll(READY_TIMEOUT_S):
            raise WorkerFailed(f"worker {slot_name(slot)} did not start in "
                               f"{READY_TIMEOUT_S:g} s")
        try:
            tag, _ = conn.recv()
        except EOFError:
            raise WorkerFailed(f"worker {slot_name(slot)} exited while starting") from None
        if tag != "ready":
            raise WorkerFailed(f"worker {slot_name(slot)}: unexpected first message {tag!r}")

    def submit(self, slot: Slot, order: dict[str, Any]) -> None:
        try:
            self._conns[slot].send(("run", order))
        except (BrokenPipeError, OSError):
            log.warning("worker of %s is gone; the order will be reported as a fault",
                        slot_name(slot))

    def poll(self, timeout: float) -> list[Event]:
        by_handle: dict[Any, tuple[str, Slot]] = {}
        for slot, conn in self._conns.items():
            by_handle[conn] = ("conn", slot)
            by_handle[self._procs[slot].sentinel] = ("proc", slot)
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
                        if tag == "error":
                            raise WorkerFailed(f"worker {slot_name(slot)}: {payload}")
                        events.append((tag, slot, payload))
                except (EOFError, OSError):
                    dead.add(slot)
            else:
                dead.add(slot)
        for slot in sorted(dead):
            proc = self._procs[slot]
            proc.join(timeout=1.0)
            if not proc.is_alive():
                events.append(("died", slot, f"exit code {proc.exitcode}"))
        return events

    def restart(self, slot: Slot) -> None:
        self._stop(slot)
        self._spawn(slot)
        self._wait_ready(slot)

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
        self._started = False


class WorkerFailed(Exception):
    """A worker raised while running an order (a bug or a bad environment, not a fault)."""


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
        self.warm: list[str] = []
        self._actor_class: Any = ray.remote(_RayWorker)

    def _spawn(self, slot: Slot) -> None:
        gpus = 1 if self.devices.get(slot, "cpu").startswith("cuda") else 0
        actor: Any = self._actor_class.options(num_cpus=self.threads, num_gpus=gpus,
                                          max_restarts=0).remote(self.threads)
        self._actors[slot] = actor
        pid, host = self._ray.get(actor.where.remote())
        self._ray.get(actor.warm_up.remote(self.warm))
        self._pids[slot] = int(pid)
        self._hosts[slot] = str(host)

    def start(self, slots: list[Slot], warm: list[str]) -> None:
        self.warm = list(warm)
        for slot in slots:
            self._spawn(slot)
        self._started = True

    def submit(self, slot: Slot, order: dict[str, Any]) -> None:
        ref = self._actors[slot].run.remote(order)
        self._refs[ref] = slot

    def poll(self, timeout: float) -> list[Event]:
        if not self._refs:
            time.sleep(max(timeout, 0.0))
            return []
        ready, _ = self._ray.wait(list(self._refs), num_returns=1, timeout=max(timeout, 0.0))
        events: list[Event] = []
        for ref in ready:
            slot = self._refs.pop(ref)
            try:
                events.append(("result", slot, self._ray.get(ref)))
            except self._ray.exceptions.RayActorError as exc:
                events.append(("died", slot, f"actor died: {type(exc).__name__}"))
            except self._ray.exceptions.RayTaskError as exc:
                raise WorkerFailed(f"worker {slot_name(slot)}: {exc}") from None
        return events

    def restart(self, slot: Slot) -> None:
        actor = self._actors.pop(slot, None)
        if actor is not None:
            self._ray.kill(actor, no_restart=True)
        for ref, owner in list(self._refs.items()):
            if owner == slot:
                del self._refs[ref]
        self._spawn(slot)

    def pid(self, slot: Slot) -> int:
        return self._pids[slot]

    def store_host(self) -> str:
        return str(self._ray.util.get_node_ip_address())

    def close(self) -> None:
        for actor in self._actors.values():
            self._ray.kill(actor, no_restart=True)
        self._actors.clear()
        self._refs.clear()
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
