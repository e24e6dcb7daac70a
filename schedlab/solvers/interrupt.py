"""Ctrl-C during a solve: stop the solver through its own interrupt, then raise.

A HiGHS solve runs in C++ and holds the main thread, so Python sees SIGINT only when ``run()``
returns -- a MILP interrupted at second 1 ran on to its end (87 s in one report) and the
command then exited 0.  :func:`run_interruptibly` turns SIGINT into a stop request that
HiGHS's own interrupt callbacks deliver, then raises :class:`KeyboardInterrupt` once the
solve has returned, so the command exits 130 without writing a result.  Off the main thread
(a pool worker, a Ray actor) the plain ``run()`` is used: signals reach only the main
thread.

:func:`call_interruptibly` does the same for any blocking call with a stop function
(CP-SAT: ``solver.solve`` with ``solver.stop_search``).
"""

from __future__ import annotations

import operator
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds between two checks for Ctrl-C while the solver runs (the wait returns at once
#: when the solver finishes; this only bounds how late an interrupt is seen).
POLL_S = 0.1


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


def call_interruptibly(call: Callable[[], T], stop: Callable[[], object]) -> T:
    """``call()`` on a helper thread, ``stop()`` on Ctrl-C, then :class:`KeyboardInterrupt`
    once ``call`` has returned; off the main thread just ``call()``."""
    if threading.current_thread() is not threading.main_thread():
        return call()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="schedlab-solve", daemon=True)
    worker.start()
    interrupted = False
    while True:  # a KeyboardInterrupt anywhere in the wait stops the call and waits on
        try:
            while worker.is_alive():
                worker.join(POLL_S)
            break
        except KeyboardInterrupt:
            interrupted = True
            stop()
    if interrupted:
        raise KeyboardInterrupt
    if "error" in box:
        raise box["error"]
    return box["value"]


__all__ = ["POLL_S", "call_interruptibly", "run_interruptibly"]
