"""Ctrl-C during a solve: stop the solver through its own interrupt, then raise.

A HiGHS solve runs in C++ and holds the main thread, so Python sees SIGINT only when ``run()``
returns -- a MILP interrupted at second 1 ran on to its end (87 s in one report) and the
command then exited 0.  :func:`run_interruptibly` turns SIGINT into a stop request that
HiGHS's own interrupt callbacks deliver, then raises :class:`KeyboardInterrupt` once the
solve has returned, so the command exits 130 without writing a result.  Off the main thread
(a pool worker, a Ray actor) the plain ``run()`` is used: signals reach only the main
thread.

:func:`stop_on_sigint` does the same for a solver with a thread-safe stop function and no
interrupt callbacks (CP-SAT: ``solver.solve`` with ``solver.stop_search``).
"""

from __future__ import annotations

import contextlib
import operator
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any


def run_interruptibly(highs: Any, run: Callable[[], Any] | None = None) -> Any:
    """``highs.run()`` (or ``run()``), stoppable by Ctrl-C (module docstring); returns its
    ``HighsStatus``.

    On the main thread, while the solve runs, SIGINT only sets a flag, and highspy's
    simplex, IPM and MIP interrupt callbacks (Python functions HiGHS calls from the solve,
    on this thread, many times a second) pass it on with ``event.interrupt()``; Python runs
    the signal handler before the next callback's code.  When ``run`` returns, a flagged
    solve raises :class:`KeyboardInterrupt`.  No thread is involved: a solve on a helper
    thread left HiGHS's thread pool behind at exit ("terminate called without an active
    exception")."""
    solve = highs.run if run is None else run
    if threading.current_thread() is not threading.main_thread():
        return solve()
    flag = {"stop": False}

    def on_sigint(signum: int, frame: Any) -> None:
        flag["stop"] = True

    def on_interrupt(event: Any) -> None:
        if flag["stop"]:
            event.interrupt()

    hooks = ("cbSimplexInterrupt", "cbIpmInterrupt", "cbMipInterrupt")
    previous = signal.signal(signal.SIGINT, on_sigint)
    for hook in hooks:  # highspy's ``h.cbX += f`` (its descriptors define += and -=)
        setattr(highs, hook, operator.iadd(getattr(highs, hook), on_interrupt))
    try:
        status = solve()
    finally:
        for hook in hooks:
            setattr(highs, hook, operator.isub(getattr(highs, hook), on_interrupt))
        signal.signal(signal.SIGINT, previous)
    if flag["stop"]:
        raise KeyboardInterrupt
    return status


@contextlib.contextmanager
def stop_on_sigint(stop: Callable[[], object]) -> Iterator[dict[str, bool]]:
    """While the block runs (a solver's blocking call on the main thread), SIGINT calls
    ``stop()`` at once and sets ``flag["stop"]``; the caller raises :class:`KeyboardInterrupt`
    after the call returned.  The solver must not catch SIGINT itself (CP-SAT:
    ``catch_sigint_signal = False``).

    Python's own signal handler runs only between bytecodes of the main thread, which the
    solver holds, so the signal is seen through ``signal.set_wakeup_fd``: the interpreter's C
    handler writes the signal's number to a pipe at once, and a helper thread reading the
    pipe calls ``stop()`` (CP-SAT's ``stop_search`` is made to be called from another
    thread).  Off the main thread nothing is installed."""
    flag = {"stop": False}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def on_sigint(signum: int, frame: Any) -> None:
        flag["stop"] = True

    def watch() -> None:
        while True:
            try:
                data = os.read(read_end, 64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGINT in data:
                flag["stop"] = True
                stop()

    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    previous = signal.signal(signal.SIGINT, on_sigint)
    watcher = threading.Thread(target=watch, name="schedlab-sigint", daemon=True)
    watcher.start()
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.set_wakeup_fd(previous_fd)
        os.close(write_end)  # the watcher reads end-of-file and returns
        watcher.join(1.0)
        os.close(read_end)


__all__ = ["run_interruptibly", "stop_on_sigint"]
