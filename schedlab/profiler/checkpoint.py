"""Checkpoints that are whole or absent, and that say when they are corrupt.

A checkpoint of a :class:`~schedlab.profiler.zoo.TrainingJob` is one file
``step-<steps_done, 12 digits>.ckpt`` in the job's folder:

* line 1: ``schedlab-ckpt@1 <sha256 of the payload, 64 hex digits>\\n``;
* then the payload: ``torch.save`` of :meth:`TrainingJob.state` (model, optimizer, step
  counter, seed, RNG state - tensors, dicts and numbers only).

Writing: the bytes go to a temporary file in the same folder, which is flushed and
``fsync``'d, then renamed over the final name, and the folder is ``fsync``'d (so after a crash
either the new checkpoint exists whole or the previous one is still the latest).  The newest
``keep`` checkpoints are kept; older ones are deleted.

Reading: :func:`load_latest` tries checkpoints newest first, loads with
``torch.load(weights_only=True)`` (no pickled code runs), and skips, reporting each, any file
whose checksum does not match its header (a torn or tampered file), whose payload the
restricted unpickler refuses or cannot read although the checksum holds (a file another
program wrote under our name), that holds no state dict, or whose state's ``steps_done``
differs from the step count in its name (a stray or renamed file: the name is only where to
look, never what to believe); the job resumes from the newest good one, or from scratch
when none is good.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import pickle
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

MAGIC = b"schedlab-ckpt@1"
_NAME = re.compile(r"^step-(\d{12})\.ckpt$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class CorruptCheckpointError(Exception):
    """A checkpoint file whose header or checksum does not match its payload."""


def checkpoint_name(steps_done: int) -> str:
    """File name of the checkpoint taken after ``steps_done`` steps."""
    return f"step-{steps_done:012d}.ckpt"


def encode(state: dict[str, Any]) -> bytes:
    """Header line + ``torch.save`` payload of ``state``."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    digest = hashlib.sha256(payload).hexdigest().encode("ascii")
    return MAGIC + b" " + digest + b"\n" + payload


def decode(data: bytes, *, source: str = "checkpoint") -> dict[str, Any]:
    """Verify the header's checksum, then load the payload with ``weights_only=True``."""
    header, newline, payload = data.partition(b"\n")
    parts = header.split(b" ")
    if not newline or len(parts) != 2 or parts[0] != MAGIC or len(parts[1]) != 64:
        raise CorruptCheckpointError(f"{source}: not a schedlab checkpoint (bad header)")
    if hashlib.sha256(payload).hexdigest().encode("ascii") != parts[1]:
        raise CorruptCheckpointError(f"{source}: checksum mismatch (torn or modified file)")
    try:
        state = torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError,
            KeyError, AttributeError, ImportError, IndexError) as exc:
        # the checksum holds, so another program wrote this payload: the restricted
        # unpickler refused it (UnpicklingError) or torch could not read its archive
        raise CorruptCheckpointError(f"{source}: payload refused ({_first_line(exc)})"
                                     ) from None
    if not isinstance(state, dict):
        raise CorruptCheckpointError(f"{source}: payload is not a state dict")
    return state


def _first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` without terminal colour codes (torch's refusal
    messages span many lines)."""
    lines = _ANSI.sub("", str(exc)).strip().splitlines()
    text = lines[0] if lines else ""
    return f"{type(exc).__name__}: {text[:160]}"


def state_steps(state: dict[str, Any]) -> int | None:
    """The ``steps_done`` a decoded state holds, or None when it holds no whole number."""
    steps = state.get("steps_done")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        return None
    return steps


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. a platform without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durable(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``: temporary file, flush, fsync, rename, fsync the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def list_checkpoints(folder: str | Path) -> list[tuple[int, Path]]:
    """(steps_done, path) of every checkpoint file in ``folder``, oldest first."""
    root = Path(folder)
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match[1]), entry))
    return sorted(found)


def save_checkpoint(folder: str | Path, state: dict[str, Any], *, keep: int = 2) -> Path:
    """Write ``state`` (with its ``steps_done``) durably; keep the newest ``keep`` files."""
    root = Path(folder)
    path = root / checkpoint_name(int(state["steps_done"]))
    write_durable(path, encode(state))
    for _, old in list_checkpoints(root)[:-keep] if keep > 0 else []:
        old.unlink(missing_ok=True)
    return path


@dataclass
class Restored:
    """What :func:`load_latest` found: the state (None: start from scratch), its file, and
    the files skipped as corrupt."""

    state: dict[str, Any] | None
    path: Path | None = None
    corrupt: list[Path] = field(default_factory=list)


def read_checkpoint(path: Path, named_steps: int) -> dict[str, Any]:
    """The verified state of the checkpoint file ``path``, whose name says ``named_steps``:
    :func:`decode` (checksum, then the restricted unpickler), then its ``steps_done`` must
    be that number (CorruptCheckpointError otherwise; OSError when unreadable)."""
    state = decode(path.read_bytes(), source=str(path))
    steps = state_steps(state)
    if steps is None:
        raise CorruptCheckpointError(f"{path}: the state holds no step count")
    if steps != named_steps:
        raise CorruptCheckpointError(f"{path}: the file name says step {named_steps}, the "
                                     f"contents say {steps}")
    return state


def load_latest(folder: str | Path, *, max_steps: int | None = None) -> Restored:
    """The newest checkpoint in ``folder`` that :func:`read_checkpoint` verifies (and, when
    ``max_steps`` is given, whose step count is at most that); the others tried on the way
    are skipped and logged, so the job restarts from the previous good one."""
    corrupt: list[Path] = []
    for steps, path in reversed(list_checkpoints(folder)):
        try:
            state = read_checkpoint(path, steps)
            if max_steps is not None and steps > max_steps:
                raise CorruptCheckpointError(f"{path}: step {steps} is past the job's "
                                             f"{max_steps} steps of work")
        except (CorruptCheckpointError, OSError) as exc:  # OSError: an unreadable file
            log.warning("skipping checkpoint %s: %s", path, exc)
            corrupt.append(path)
            continue
        return Restored(state, path, corrupt)
    return Restored(None, None, corrupt)
