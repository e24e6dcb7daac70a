"""Atomic writes: a file appears whole under its name, or not at all.

Every writer of the package (instances, solutions, result tables, plots, generated examples)
goes through :func:`atomic_path`: it hands out a temporary file in the target's own folder
(so the final rename stays on one file system), and on success makes it world-readable (0644;
``mkstemp`` creates 0600) and renames it over the target.  An exception, or an interrupt,
removes the temporary file and leaves any previous version of the target untouched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: str | Path, *, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it to ``path`` when the block ends
    without an exception.  ``suffix`` ends the temporary name (some writers pick their
    format by it)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=folder)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(payload)


def write_json_atomic(path: str | Path, payload: Any, *, indent: int | None = 2) -> None:
    """Write JSON to a temporary file in the same folder, then rename (never half-written)."""
    import json

    text = json.dumps(payload, indent=indent, allow_nan=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))
