"""One atomic-write helper: a file appears whole under its name, or not at all."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from schedlab.atomic import atomic_path, write_bytes_atomic


def test_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    write_bytes_atomic(target, b"old")
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise KeyboardInterrupt
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_write_creates_folders_and_a_shared_readable_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out.csv"
    with atomic_path(target, suffix=".tmp") as tmp:
        assert tmp.parent == target.parent and tmp.name.endswith(".tmp")
        tmp.write_text("x,y\n")
    assert target.read_text() == "x,y\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
