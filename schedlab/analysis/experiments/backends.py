"""Where cells run: a local process pool or Ray, behind one ``submit(fn, *args) -> Future``.

* ``local``: a :class:`~concurrent.futures.ProcessPoolExecutor` started with ``forkserver``
  (``spawn`` where that is missing, or in a process forked after its parent started the fork
  server), never ``fork``: a pool forked after HiGHS or Ray threads
  started can hang.  Its workers die with this process (:func:`schedlab.orphans.die_with`).
* ``ray``: each cell one Ray task (``num_cpus=1``, no retries); connects to ``address``
  when given, else starts a local Ray with ``workers`` CPUs and stops it at the end (a Ray
  already initialized in this process is used as it is).  Ray is optional
  (``pip install 'schedlab[ray]'``) and imported only here.

Either way the function and its arguments are pickled, so a cell's ``compute`` is a
module-level function, and results come back to this process, which writes the cell files:
both backends write the same files.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from schedlab.errors import InputError
from schedlab.orphans import die_with, process_pool

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'schedlab[ray]'"


class Pool(Protocol):
    """What the runner needs of a backend."""

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]: ...

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None: ...


#: Whether this process has started multiprocessing's fork server.
_STARTED_FORKSERVER = False
#: Whether this process was forked from one that had: its copy of the fork server's state
#: is not usable here (multiprocessing waits on a server that is not its child), so it spawns.
_FORKED_AFTER_FORKSERVER = False


def _after_fork_in_child() -> None:
    global _FORKED_AFTER_FORKSERVER
    _FORKED_AFTER_FORKSERVER = _FORKED_AFTER_FORKSERVER or _STARTED_FORKSERVER


os.register_at_fork(after_in_child=_after_fork_in_child)


def start_method() -> str:
    """``forkserver`` where the platform has it, else ``spawn``; ``spawn`` too in a process
    forked from one that started the fork server."""
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods and not _FORKED_AFTER_FORKSERVER:
        return "forkserver"
    return "spawn"


def local_pool(workers: int) -> Pool:
    """A pool of ``workers`` local processes (module docstring)."""
    global _STARTED_FORKSERVER
    method = start_method()
    _STARTED_FORKSERVER = _STARTED_FORKSERVER or method == "forkserver"
    return process_pool(workers, mp_context=multiprocessing.get_context(method))


def import_ray() -> Any:
    """The ``ray`` module, or an :class:`InputError` (exit 2) saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise InputError(f"the ray backend needs Ray, which is not installed ({exc}); "
                         f"{INSTALL_HINT}, or use --backend local", field="--backend") \
            from None
    return ray


#: Drivers a Ray worker of this process already watches (one watchdog each).
_WATCHED: set[int] = set()


def _ray_task(fn: Callable[..., Any], parent: int, *args: Any) -> Any:
    """Run ``fn(*args)`` in a Ray worker that exits if the driver ``parent`` (0: none, a
    remote cluster) dies; a local Ray's workers otherwise outlive a killed driver."""
    if parent and parent not in _WATCHED:
        _WATCHED.add(parent)
        die_with(parent, False)
    return fn(*args)


class RayPool:
    """Ray tasks behind ``submit``/``shutdown`` (module docstring)."""

    def __init__(self, workers: int, address: str | None = None) -> None:
        self.ray = import_ray()
        self.started_here = not self.ray.is_initialized()
        if self.started_here:
            if address is not None:
                log.info("connecting to the Ray cluster at %s", address)
                self.ray.init(address=address, logging_level=logging.WARNING)
            else:
                log.info("starting a local Ray instance with %d CPU(s)", workers)
                self.ray.init(num_cpus=workers, include_dashboard=False,
                              logging_level=logging.WARNING)
        elif address is not None:
            log.warning("Ray is already initialized in this process; address %s is not used",
                        address)
        self.local = address is None
        self.task = self.ray.remote(num_cpus=1, max_retries=0)(_ray_task)
        self.refs: dict[Future[Any], Any] = {}

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        parent = os.getpid() if self.local else 0
        ref = self.task.remote(fn, parent, *args)
        future: Future[Any] = ref.future()
        self.refs[future] = ref
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        try:
            if cancel_futures:
                for future, ref in self.refs.items():
                    if not future.done():
                        self.ray.cancel(ref, force=True)
        finally:
            self.refs.clear()
            if self.started_here:
                self.ray.shutdown()


#: (registry kind, name, factory, description, defaults) of a run-time registration.
Registration = tuple[str, str, Any, str, dict[str, Any]]


def runtime_registrations() -> tuple[Registration, ...]:
    """The policies and formulations this process registered at run time (a script's
    ``register_policy``) whose factory pickles: a worker started with forkserver, spawn or
    Ray registers them again before it computes (:func:`call_in_context`); entry-point
    plug-ins and built-ins load there by themselves."""
    import pickle

    from schedlab.policies.registry import POLICIES
    from schedlab.registry import FORMULATIONS

    found: list[Registration] = []
    for kind, registry in (("policy", POLICIES), ("formulation", FORMULATIONS)):
        for entry in registry.runtime_entries():
            item = (kind, entry.name, entry.factory, entry.description, dict(entry.defaults))
            try:
                pickle.dumps(item)
            except (pickle.PicklingError, TypeError, AttributeError):
                log.warning("%s %r was registered at run time with a factory that does not "
                            "pickle; workers started by the runner will not know it",
                            kind, entry.name)
                continue
            found.append(item)
    return tuple(found)


@dataclass(frozen=True)
class WorkerContext:
    """What a worker takes from the runner before each cell: the run-time registrations, and
    for local workers the runner's environment variables and working folder (a fork server's
    workers otherwise keep those of the moment the server started)."""

    registrations: tuple[Registration, ...] = ()
    environ: dict[str, str] | None = None
    cwd: str | None = None

    @classmethod
    def of_this_process(cls, backend: str) -> WorkerContext:
        """The context to send: registrations always, environment and folder for ``local``."""
        if backend == "local":
            return cls(runtime_registrations(), dict(os.environ), os.getcwd())
        return cls(runtime_registrations())


#: Registrations this worker process has made already.
_REGISTERED: set[tuple[str, str]] = set()


def call_in_context(context: WorkerContext, fn: Callable[..., Any], /, *args: Any) -> Any:
    """``fn(*args)`` in this worker after taking on ``context`` (registrations once each)."""
    if context.environ is not None and context.environ != os.environ:
        os.environ.clear()
        os.environ.update(context.environ)
    if context.cwd is not None and context.cwd != os.getcwd():
        os.chdir(context.cwd)
    if context.registrations:
        from schedlab.policies.registry import POLICIES
        from schedlab.registry import FORMULATIONS

        for kind, name, factory, description, defaults in context.registrations:
            if (kind, name) in _REGISTERED:
                continue
            registry: Any = POLICIES if kind == "policy" else FORMULATIONS
            if name not in registry.entries():
                registry.register(name, factory, description, **defaults)
            _REGISTERED.add((kind, name))
    return fn(*args)


def make_pool(backend: str, workers: int, address: str | None = None) -> Pool:
    """The pool of ``backend`` (``local`` or ``ray``) with ``workers`` at once."""
    if backend == "ray":
        return RayPool(workers, address)
    if backend != "local":
        raise InputError(f"unknown backend {backend!r} (known: local, ray)", field="--backend")
    return local_pool(workers)


__all__ = ["INSTALL_HINT", "Pool", "RayPool", "WorkerContext", "call_in_context", "import_ray",
           "local_pool", "make_pool", "runtime_registrations", "start_method"]
