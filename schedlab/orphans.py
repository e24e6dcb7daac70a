"""Worker processes that die with the process that started them.

A pool worker (:class:`~concurrent.futures.ProcessPoolExecutor`, or a
:class:`multiprocessing.Process`) outlives its parent when the parent is killed with SIGKILL:
nothing runs in the parent to stop it, so it goes on computing and holding the terminal's
pipes.  :func:`die_with` makes the calling process end when a given process (the *main*
process, whose pid the parent passes in) ends, by two mechanisms:

1. **Linux ``PR_SET_PDEATHSIG``.**  ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (through ``ctypes``)
   asks the kernel to SIGKILL this process when its parent ends.  The parent is the main
   process for the ``fork`` and ``spawn`` start methods, and the fork server for
   ``forkserver``, which itself exits when the main process ends (its "alive" pipe to the main
   process reaches end of file).  The kernel sends the signal when the parent *thread* that
   created the worker exits, so this is set only when that thread outlives the worker (the
   ``pdeathsig`` argument; a fork server has a single thread).  ``os.getppid()`` is checked
   right after the call: a parent that died before it leaves the worker reparented, and the
   worker exits at once.
2. **A watchdog thread** (every platform; a daemon thread, so it never keeps the worker
   alive).  On Linux it waits on a pidfd of the main process (``os.pidfd_open``: woken when
   that process ends, immune to pid reuse); elsewhere it polls every :data:`POLL_S` s
   whether the main process still exists (``os.kill(pid, 0)``; a zombie counts as ended) and
   whether the worker's parent changed.  Either way it ends the worker with ``os._exit``
   (no cleanup: the worker's parent is gone, nobody waits for its results).

:func:`process_pool` is a ``ProcessPoolExecutor`` whose workers run :func:`die_with` as their
initializer; every local pool of the package (sweeps, table cells, profiler workers) uses it.
"""

from __future__ import annotations

import logging
import os
import select
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

log = logging.getLogger(__name__)

#: seconds between two checks of the polling watchdog (no pidfd)
POLL_S = 0.5
#: exit status of a worker ended because its main process ended
ORPHAN_EXIT = 70

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_SIGKILL = 9


def set_parent_death_signal() -> bool:
    """Ask Linux to SIGKILL this process when its parent (thread) ends; False where the
    platform has no ``prctl`` or the call failed."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        result = libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
    except (OSError, AttributeError) as exc:
        log.debug("prctl(PR_SET_PDEATHSIG) unavailable: %s", exc)
        return False
    if result != 0:
        log.debug("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
        return False
    return True


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a zombie, ended but not yet reaped by
    its parent, counts as ended where ``/proc`` tells)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    return proc_state(pid) not in ("Z", "X")


def proc_state(pid: int) -> str | None:
    """The state letter of ``/proc/<pid>/stat`` (R, S, Z, ...), or None without ``/proc``."""
    fields = proc_stat(pid)
    return fields[0] if fields else None


def proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first; field ``n``
    of proc(5) is index ``n - 3``), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def _exit_orphan() -> None:
    os._exit(ORPHAN_EXIT)


def _watch_pidfd(fd: int) -> None:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while not poller.poll():
        pass
    _exit_orphan()


def _watch_polling(pid: int, parent: int, poll_s: float) -> None:
    while True:
        time.sleep(poll_s)
        if os.getppid() != parent or not process_alive(pid):
            _exit_orphan()


def start_watchdog(pid: int, *, poll_s: float = POLL_S, use_pidfd: bool = True
                   ) -> threading.Thread:
    """Start the daemon thread that ends this process (``os._exit``) once process ``pid``
    ends, or (polling only) once this process's parent changes (module docstring)."""
    parent = os.getppid()
    fd: int | None = None
    if use_pidfd and hasattr(os, "pidfd_open"):
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            _exit_orphan()
        except OSError as exc:  # an old kernel, a seccomp filter: poll instead
            log.debug("pidfd_open(%d) failed (%s); polling", pid, exc)
    if fd is not None:
        thread = threading.Thread(target=_watch_pidfd, args=(fd,), name="orphan-watchdog",
                                  daemon=True)
    else:
        thread = threading.Thread(target=_watch_polling, args=(pid, parent, poll_s),
                                  name="orphan-watchdog", daemon=True)
    thread.start()
    return thread


def die_with(pid: int, pdeathsig: bool = True) -> None:
    """Make this process end when process ``pid`` (the main process) ends.

    ``pdeathsig``: also set Linux's parent-death signal when ``pid`` is this process's
    parent, which is safe only when the thread of ``pid`` that started this process outlives
    it (module docstring); a fork server (``pid`` not the parent) always gets it.  Exits at
    once when ``pid`` has already ended.  Meant as a pool ``initializer`` (module-level, so
    it pickles for every start method)."""
    parent = os.getppid()
    if pdeathsig or parent != pid:
        set_parent_death_signal()
        if os.getppid() != parent:  # the parent ended before the signal was armed
            _exit_orphan()
    if not process_alive(pid):
        _exit_orphan()
    start_watchdog(pid)


def process_pool(max_workers: int, **options: Any) -> ProcessPoolExecutor:
    """A :class:`~concurrent.futures.ProcessPoolExecutor` of ``max_workers`` workers that die
    with this process (:func:`die_with` as their initializer).  ``options`` go to the
    executor (``mp_context``, ...).  Submit to it and shut it down in the thread that created
    it: the parent-death signal is armed only when that is the main thread."""
    pdeathsig = threading.current_thread() is threading.main_thread()
    return ProcessPoolExecutor(max_workers=max_workers, initializer=die_with,
                               initargs=(os.getpid(), pdeathsig), **options)


__all__ = ["ORPHAN_EXIT", "POLL_S", "die_with", "process_alive", "process_pool",
           "set_parent_death_signal", "start_watchdog"]
