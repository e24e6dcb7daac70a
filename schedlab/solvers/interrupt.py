"""Ctrl-C during a solve: stop the solver through its own interrupt, then raise.

A HiGHS solve runs in C++ and holds the main thread, so Python sees SIGINT only when ``run()``
returns -- a MILP interrupted at second 1 ran on to its end (87 s in one report) and the
command then exited 0.  :func:`run_interruptibly` runs the solve on highspy's solver thread
(``startSolve``) while the main thread waits in short, interruptible steps; on
:class:`KeyboardInterrupt` it asks HiGHS to stop (``cancelSolve``: the simplex, IPM and MIP
interrupt callbacks see the flag within one callback interval), waits for the solver thread
to return, and raises :class:`KeyboardInterrupt` again, so the command exits 130 without
writing a result.  Off the main thread (a pool worker, a Ray actor) the plain ``run()`` is
used: signals reach only the main thread.

:func:`call_interruptibly` does the same for any blocking call with a stop function
(CP-SAT: ``solver.solve`` with ``solver.stop_search``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds between two checks for Ctrl-C while the solver runs (the wait returns at once
#: when the solver finishes; this only bounds how late an interrupt is seen).
POLL_S = 0.1


def run_interruptibly(highs: Any) -> Any:
    """``highs.run()``, stoppable by Ctrl-C (module docstring); returns its ``HighsStatus``."""
    if threading.current_thread() is not threading.main_thread():
        return highs.run()
    highs.HandleUserInterrupt = True
    interrupted = False
    try:
        highs.startSolve()
        while True:
            try:
                done, status = highs.wait(POLL_S)
            except KeyboardInterrupt:
                interrupted = True
                highs.cancelSolve()
                continue
            if done:
                break
    finally:
        highs.HandleUserInterrupt = False
    if interrupted:
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
    while worker.is_alive():
        try:
            worker.join(POLL_S)
        except KeyboardInterrupt:
            interrupted = True
            stop()
    if interrupted:
        raise KeyboardInterrupt
    if "error" in box:
        raise box["error"]
    return box["value"]


__all__ = ["POLL_S", "call_interruptibly", "run_interruptibly"]
