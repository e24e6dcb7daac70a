"""A silent ``highspy.Highs``: no banner, no log lines on stdout.

HiGHS prints its banner ("Running HiGHS x.y.z ...: Copyright ...") from C++ on file
descriptor 1 the first time a ``Highs`` object is made in a process, before any option can be
set, so ``output_flag=False`` alone does not hide it.  :func:`new_highs` builds the first
object of the process with descriptor 1 pointed at ``/dev/null`` (HiGHS prints the banner only
once per process, so later objects need no redirect) and turns ``output_flag`` off unless
``verbose``, which sends HiGHS's log to stderr instead of stdout.  Pyomo's HiGHS interface
captures the solver's output itself (and shows it with ``tee``, given ``sys.stderr`` by
:mod:`schedlab.solvers.base`), so this is for code that uses ``highspy`` directly.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from typing import Any

log = logging.getLogger(__name__)

_lock = threading.Lock()
_banner_done = False


def new_highs(*, verbose: bool = False) -> Any:
    """A new ``highspy.Highs`` with its console output off; with ``verbose`` its log goes
    to stderr (a logging callback; diagnostics never on stdout, where results go)."""
    import highspy

    global _banner_done
    with _lock:
        if _banner_done:
            h = highspy.Highs()
        else:
            h = _build_muted(highspy.Highs)
            _banner_done = True
    if verbose:
        h.setOptionValue("log_to_console", False)
        h.cbLogging += _log_to_stderr
        return h
    h.setOptionValue("output_flag", False)
    return h


def _log_to_stderr(event: Any) -> None:
    """HiGHS's log lines (a logging callback's events) on stderr."""
    sys.stderr.write(event.message)


def _build_muted(factory: Any) -> Any:
    """``factory()`` with file descriptor 1 sent to /dev/null while it runs."""
    with contextlib.suppress(OSError, ValueError):  # a closed or broken stdout: no order to keep
        sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1 to redirect
        return factory()
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            try:
                return factory()
            finally:
                os.dup2(saved, 1)
        finally:
            os.close(null)
    finally:
        os.close(saved)
