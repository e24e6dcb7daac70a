"""Claims: runners that share an output folder compute each result once.

A sweep run or a table cell is computed by whichever runner *claims* it first.  The claim is
a file next to the result (:func:`claim_file`: ``<result>.claim``) created with
``os.open(O_CREAT | O_EXCL)``, which the file system lets exactly one process do; it holds
the owner as JSON: pid, host name, pid namespace, the process's start time (``/proc``, so a
reused pid is not mistaken for the owner) and a random token.  The owner removes it once the
result is written (atomically, by :mod:`schedlab.atomic`) or when it stops without the result
(Ctrl-C, an error: ``try``/``finally``).

A claim is *stale* when its owner is gone: same host name and pid namespace, and that pid no
longer runs (or runs another program, started at another time), or the file is still unreadable
:data:`UNREADABLE_GRACE_S` s after it was made (its maker died between creating and writing
it).  A stale claim is taken over: renamed to a private name (one rename wins), checked to
be the claim judged stale (if a live claim was moved by mistake it is linked back), removed,
and the run is claimed again with ``O_EXCL``.  A claim of another host is never judged
stale (nor one of another pid namespace, e.g. another container): delete it by hand if that
machine is gone.

:class:`ClaimQueue` hands out a runner's work: the next item whose result is missing and
that it could claim; items claimed by live other runners wait and are looked at again every
:data:`POLL_S` s until their result appears (taken as found) or their claim goes (taken over:
the owner stopped or died), so a runner ends with every result.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from schedlab.orphans import proc_stat, process_alive

log = logging.getLogger(__name__)

#: what a claim file's name adds to its result's name
CLAIM_SUFFIX = ".claim"
#: seconds between two looks at the items other runners claimed
POLL_S = 1.0
#: seconds after which a claim file that cannot be read counts as stale
UNREADABLE_GRACE_S = 30.0

ItemT = TypeVar("ItemT")
DoneT = TypeVar("DoneT")


def claim_file(result: Path) -> Path:
    """The claim file of the result file ``result``."""
    return result.with_name(result.name + CLAIM_SUFFIX)


def _pid_namespace() -> str | None:
    """This process's pid namespace (``/proc/self/ns/pid``), or None without ``/proc``:
    containers may share a host name and a file system but not their pids."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    """Process ``pid``'s start time (``/proc/<pid>/stat`` field 22, clock ticks after boot)."""
    fields = proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


@dataclass(frozen=True)
class Owner:
    """Who holds a claim: ``pid`` on ``host`` in pid namespace ``namespace``, started at
    ``started``; ``token`` is unique to the claim, ``created`` its Unix time."""

    pid: int
    host: str
    started: str | None
    token: str
    created: float
    namespace: str | None = None

    @classmethod
    def me(cls) -> Owner:
        """This process, with a new token."""
        pid = os.getpid()
        return cls(pid=pid, host=socket.gethostname(), started=_start_time(pid),
                   token=uuid.uuid4().hex, created=time.time(), namespace=_pid_namespace())

    @classmethod
    def parse(cls, payload: bytes) -> Owner | None:
        """The owner written in a claim file, or None when it is not one (yet)."""
        try:
            data = json.loads(payload)
            return cls(pid=int(data["pid"]), host=str(data["host"]),
                       started=_optional(data.get("started")), token=str(data["token"]),
                       created=float(data.get("created", 0.0)),
                       namespace=_optional(data.get("namespace")))
        except (ValueError, KeyError, TypeError):
            return None

    def alive(self) -> bool:
        """False only when the owner is known to be gone (same host and pid namespace, pid
        ended or reused)."""
        if self.host != socket.gethostname():
            return True
        here = _pid_namespace()
        if self.namespace is not None and here is not None and self.namespace != here:
            return True
        if not process_alive(self.pid):
            return False
        now = _start_time(self.pid)
        return self.started is None or now is None or now == self.started

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}"


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass
class Claim:
    """A claim this process holds on ``path``."""

    path: Path
    owner: Owner

    def release(self) -> None:
        """Remove the claim file if it is still this claim (never another runner's)."""
        try:
            payload = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("cannot read claim %s to release it: %s", self.path, exc)
            return
        holder = Owner.parse(payload)
        if holder is not None and holder.token == self.owner.token:
            self.path.unlink(missing_ok=True)
        else:
            log.warning("claim %s is no longer ours (held by %s); leaving it", self.path,
                        holder or "an unreadable claim")


def acquire(path: Path) -> Claim | None:
    """Claim ``path`` for this process; None when a live other runner holds it.  A stale
    claim is taken over (module docstring)."""
    for _ in range(5):
        owner = Owner.me()
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pass
        else:
            try:
                os.write(fd, json.dumps(asdict(owner)).encode())
            except BaseException:
                os.close(fd)
                path.unlink(missing_ok=True)
                raise
            os.close(fd)
            return Claim(path, owner)
        seen = _read(path)
        if seen is None:
            continue  # released meanwhile: try again
        holder = Owner.parse(seen)
        if holder is not None and holder.alive():
            return None
        if holder is None and not _unreadable_too_long(path):
            return None  # being written
        _clear_stale(path, seen, holder)
    return None


def holder_of(path: Path) -> Owner | None:
    """The owner of the claim ``path``, or None (no claim, or unreadable)."""
    payload = _read(path)
    return None if payload is None else Owner.parse(payload)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _unreadable_too_long(path: Path) -> bool:
    try:
        return time.time() - path.stat().st_mtime > UNREADABLE_GRACE_S
    except FileNotFoundError:
        return False


def _clear_stale(path: Path, seen: bytes, holder: Owner | None) -> None:
    """Remove the stale claim ``path`` whose contents were ``seen``; a claim made meanwhile
    by a live runner is put back (module docstring)."""
    grave = path.with_name(f".{path.name}.{uuid.uuid4().hex}.stale")
    try:
        os.rename(path, grave)
    except FileNotFoundError:
        return  # another runner cleared it first
    moved = _read(grave)
    if moved == seen:
        grave.unlink(missing_ok=True)
        log.warning("took over the claim %s of %s, which is gone", path.name,
                    holder or "an unreadable claim")
        return
    try:  # a fresh claim replaced the stale one before our rename: give it back
        os.link(grave, path)
    except FileExistsError:
        log.warning("claim %s: lost a race with two other runners; a run may be computed "
                    "twice", path)
    except OSError:  # no hard links on this file system
        with contextlib.suppress(OSError):
            os.rename(grave, path)
    grave.unlink(missing_ok=True)


class ClaimQueue(Generic[ItemT, DoneT]):
    """The items a runner still has to compute, handed out one at a time under a claim.

    ``done(item)`` is the item's result when it exists (a file written by any runner), else
    None; ``claim_path(item)`` its claim file; ``found(item, result)`` is called for each item
    whose result another runner wrote, and the item leaves the queue.  Items are taken in
    order; those held by live other runners wait and are looked at again at most every
    :data:`POLL_S` s.  :meth:`release_all` (in a ``finally``) removes the claims still held.
    """

    def __init__(self, items: Iterable[ItemT], *, claim_path: Callable[[ItemT], Path],
                 done: Callable[[ItemT], DoneT | None], found: Callable[[ItemT, DoneT], None],
                 describe: Callable[[ItemT], str], poll_s: float | None = None) -> None:
        self._fresh = list(items)
        self._fresh.reverse()  # pop() from the end = the first item
        self._waiting: list[ItemT] = []
        self._claim_path = claim_path
        self._done = done
        self._found = found
        self._describe = describe
        self.poll_s = POLL_S if poll_s is None else poll_s
        self._last_look = 0.0
        self._held: dict[Path, Claim] = {}
        self._reported: set[Path] = set()
        self._paused = False

    def __len__(self) -> int:
        """Items not taken or found yet (those waiting for other runners included)."""
        return len(self._fresh) + len(self._waiting)

    @property
    def held(self) -> int:
        """Claims this runner holds."""
        return len(self._held)

    def take(self) -> tuple[ItemT, Claim] | None:
        """The next item to compute, claimed by this process; None when every item left is
        claimed by a live other runner (or none is left)."""
        while self._fresh:
            taken = self._try(self._fresh.pop())
            if taken is not None:
                return taken
        if self._waiting and time.monotonic() - self._last_look >= self.poll_s:
            self._last_look = time.monotonic()
            waiting, self._waiting = self._waiting, []
            for index, item in enumerate(waiting):
                taken = self._try(item)
                if taken is not None:
                    self._waiting.extend(waiting[index + 1:])
                    return taken
        return None

    def pause(self) -> None:
        """Sleep until the waiting items are due to be looked at again (the first time, say
        what this runner waits for)."""
        if self._waiting and not self._paused:
            self._paused = True
            log.warning("waiting for %d result(s) that other runners are computing: %s",
                        len(self._waiting),
                        ", ".join(self._describe(item) for item in self._waiting[:5])
                        + (", ..." if len(self._waiting) > 5 else ""))
        time.sleep(max(0.0, self._last_look + self.poll_s - time.monotonic()))

    def release(self, claim: Claim) -> None:
        """Remove ``claim`` (its item's result is written, or it will not be)."""
        self._held.pop(claim.path, None)
        claim.release()

    def release_all(self) -> None:
        """Remove every claim still held (an interrupted or failed runner)."""
        while self._held:
            _, claim = self._held.popitem()
            claim.release()

    def _try(self, item: ItemT) -> tuple[ItemT, Claim] | None:
        result = self._done(item)
        if result is not None:
            self._found(item, result)
            return None
        path = self._claim_path(item)
        claim = acquire(path)
        if claim is None:
            if path not in self._reported:
                self._reported.add(path)
                log.info("%s is being computed by %s; waiting for it", self._describe(item),
                         holder_of(path) or "another runner")
            self._waiting.append(item)
            return None
        result = self._done(item)  # finished between the look and the claim
        if result is not None:
            claim.release()
            self._found(item, result)
            return None
        self._held[path] = claim
        return item, claim


def drain_in_process(queue: ClaimQueue[ItemT, Any], compute: Callable[[ItemT], Any],
                     finished: Callable[[ItemT, Any], None]) -> None:
    """Compute the queue's items one by one in this process: ``compute(item)`` and
    ``finished(item, result)`` (which may write the item's file) under its claim, which is
    then released; when only items other
    runners hold are left, wait for their results or their stale claims."""
    while queue:
        taken = queue.take()
        if taken is None:
            queue.pause()
            continue
        item, claim = taken
        result = compute(item)
        try:
            finished(item, result)
        finally:
            queue.release(claim)


def drain_on_pool(queue: ClaimQueue[ItemT, Any], executor: Any, workers: int,
                  submit: Callable[[Any, ItemT], Any],
                  finished: Callable[[ItemT, Any], None]) -> dict[Any, tuple[ItemT, Claim]]:
    """Compute the queue's items on ``executor`` (a ``concurrent.futures`` pool), at most
    ``workers`` claimed at a time so a second runner into the folder takes the others:
    ``submit(executor, item)`` starts one and returns its future; as each ends
    ``finished(item, result)`` is called (a failed item re-raises here) and then its claim
    released; when only
    items other runners hold are left, wait for their results or their stale claims.
    Returns the futures still pending (empty unless interrupted: read by the caller's
    ``finally`` to say what it stops)."""
    from concurrent.futures import FIRST_COMPLETED, wait

    futures: dict[Any, tuple[ItemT, Claim]] = {}

    def fill() -> None:
        while len(futures) < workers:
            taken = queue.take()
            if taken is None:
                return
            futures[submit(executor, taken[0])] = taken

    fill()
    while futures or queue:
        if not futures:
            queue.pause()
            fill()
            continue
        done, _ = wait(futures, timeout=queue.poll_s if queue else None,
                       return_when=FIRST_COMPLETED)
        for future in done:
            item, claim = futures.pop(future)
            try:
                finished(item, future.result())  # re-raises the item's error
            finally:
                queue.release(claim)
        fill()
    return futures


__all__ = [
    "CLAIM_SUFFIX",
    "POLL_S",
    "UNREADABLE_GRACE_S",
    "Claim",
    "ClaimQueue",
    "Owner",
    "acquire",
    "claim_file",
    "drain_on_pool",
    "holder_of",
]
