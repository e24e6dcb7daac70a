"""Worker processes for measurements: a crash, an OOM kill or a hang becomes a reason string.

Every measurement runs in fresh child processes (:func:`run_workers`), so a worker that
raises, is killed (e.g. by the kernel's OOM killer) or runs past its time limit turns into
a :class:`WorkerError` with the reason, and the profiler goes on with the next cell.

Processes come from the ``forkserver`` start method where the platform has it (Linux), with
``torch`` and the zoo preloaded in the server: the server is a fresh interpreter that imported
torch but never ran a torch operation or touched CUDA, so forking from it is as safe as
``spawn`` and saves the 1-2 s of importing torch in every worker.  Elsewhere ``spawn``.  A
worker dies with the process that started it, even one killed by SIGKILL
(:func:`schedlab.orphans.die_with`; the fork server itself exits when that process ends).

Devices.  A CPU "device" is one worker with ``threads`` torch threads; where
``os.sched_setaffinity`` exists, device ``i`` is pinned to cores ``i*threads ..
(i+1)*threads - 1`` of the cores this process may use (:func:`cpu_core_sets`), so two workers
on "the same CPU device" share the same cores.  A CUDA device ``i`` is ``cuda:i``.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from schedlab.errors import SchedlabError
from schedlab.orphans import die_with

log = logging.getLogger(__name__)

#: seconds a cell's workers may run before they are stopped (``--cell-timeout``)
DEFAULT_TIMEOUT_S = 600.0

#: what the fork server imports once (torch's optimizers import torch._dynamo on first use,
#: 2-3 s)
_PRELOAD = ["torch", "torch._dynamo", "scipy.stats", "schedlab.profiler.zoo",
            "schedlab.profiler.timing", "schedlab.profiler.parallel",
            "schedlab.profiler.colocate"]


class WorkerError(SchedlabError):
    """A measurement's worker failed; ``str()`` is the reason recorded in the cell.
    ``raised`` is True when the worker's code raised an exception (rather than the worker
    dying or timing out)."""

    def __init__(self, reason: str, *, raised: bool = False) -> None:
        super().__init__(reason)
        self.raised = raised


def context() -> Any:
    """The multiprocessing context of the workers (module docstring)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for a process group's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_core_sets(devices: int, threads: int) -> list[list[int]] | None:
    """Cores of CPU devices ``0..devices-1`` (``threads`` each), or None when this process
    may not use that many cores or the platform cannot pin (then nothing is pinned)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < devices * threads:
        log.warning("%d CPU device(s) x %d thread(s) need %d cores, %d available: not pinning",
                    devices, threads, devices * threads, len(allowed))
        return None
    return [allowed[i * threads:(i + 1) * threads] for i in range(devices)]


def setup_worker(threads: int, cores: Sequence[int] | None) -> None:
    """In a worker: torch threads and (when given) the cores it may run on."""
    import torch

    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cores))
    torch.set_num_threads(threads)


def _entry(target: Callable[..., Any], index: int, payload: dict[str, Any],
           results: Any, main_pid: int) -> None:
    """Worker main: run ``target(payload)``, report ``(index, ok, value-or-reason)``, flush
    the report and leave at once with ``os._exit`` (no interpreter teardown: a process
    group's destructors can hang once a peer has gone, and the answer is already sent).
    Ctrl-C is the parent's to handle: it stops the workers (:func:`run_workers`); the
    worker dies with process ``main_pid``, the parent (:func:`schedlab.orphans.die_with`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with(main_pid)
    try:
        value = target(payload)
    except Exception as exc:  # the reason goes into the cell; the worker ends
        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" at {last[0].filename}:{last[0].lineno}" if last else ""
        results.put((index, False, f"{type(exc).__name__}: {exc}{where}"))
        code = 1
    else:
        results.put((index, True, value))
        code = 0
    results.close()
    results.join_thread()
    os._exit(code)


def run_workers(target: Callable[[dict[str, Any]], Any], payloads: Sequence[dict[str, Any]],
                *, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Any]:
    """Run ``target(payload)`` in one new process per payload, all at once; their return
    values in payload order.  Raises :class:`WorkerError` when a worker raises, dies without
    an answer, or the group runs past ``timeout_s``; the other workers are then stopped."""
    ctx = context()
    results = ctx.Queue()
    processes = [ctx.Process(target=_entry, args=(target, i, payload, results, os.getpid()),
                             daemon=True)
                 for i, payload in enumerate(payloads)]
    answers: dict[int, Any] = {}
    deadline = time.monotonic() + timeout_s
    try:
        with _sigint_after():
            for process in processes:
                process.start()
        dead_since: float | None = None
        while len(answers) < len(processes):
            try:
                index, ok, value = results.get(timeout=0.2)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise WorkerError(f"timed out after {timeout_s:g} s") from None
                dead = _dead_without_answer(processes, answers)
                if dead is None:
                    continue
                # an answer sent just before the exit may still be in the pipe: wait 1 s
                dead_since = dead_since or time.monotonic()
                if time.monotonic() - dead_since > 1.0:
                    raise WorkerError(dead) from None
                continue
            if not ok:
                raise WorkerError(f"worker {index}: {value}", raised=True)
            answers[index] = value
        for process in processes:
            process.join(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        _stop(processes)
        results.close()
    return [answers[i] for i in range(len(processes))]


@contextmanager
def _sigint_after() -> Iterator[None]:
    """Hold a Ctrl-C that arrives inside the block until the block has ended, then raise it.

    ``Process.start()`` of the fork server hands the pickled worker (with the result queue's
    semaphores) to the server and then reads the new pid.  Interrupted between the two, the
    parent does not know the worker, cannot stop it, and exits, which removes the semaphores;
    the worker then fails to unpickle them and prints a traceback into the command's stderr.
    With the interrupt held, every worker that was asked for has a pid and is stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if not held or previous == signal.SIG_IGN:  # an ignored Ctrl-C (nohup) stays ignored
        return
    if callable(previous):
        previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt
    raise KeyboardInterrupt


def _dead_without_answer(processes: Sequence[Any], answers: dict[int, Any]) -> str | None:
    """The reason of the first worker that ended without answering, or None."""
    for index, process in enumerate(processes):
        if index not in answers and process.exitcode is not None:
            code = process.exitcode
            hint = " (killed by SIGKILL: out of memory?)" if code == -9 else ""
            return f"worker {index} exited with code {code}{hint} before answering"
    return None


def _stop(processes: Sequence[Any]) -> None:
    """Terminate, then kill, the workers still running (a failed or interrupted group)."""
    started = [process for process in processes if process.pid is not None]
    for process in started:
        if process.is_alive():
            process.terminate()
    for process in started:
        process.join(timeout=5.0)
        if process.is_alive():
            process.kill()
            process.join(timeout=5.0)
