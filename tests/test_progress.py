"""Progress when redirected: one plain line per finished unit, flushed, with the count,
what finished, the elapsed time and an estimate of the rest (schedlab.progress)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

from schedlab.progress import PlainProgress


def test_plain_lines_count_and_estimate(monkeypatch: object) -> None:
    clock = iter([0.0, 10.0, 30.0])
    import schedlab.progress as progress

    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))  # type: ignore[attr-defined]
    stream = io.StringIO()
    with PlainProgress(stream) as bar:
        task = bar.add_task("demo", total=3)
        bar.update(task, advance=1, description="first")   # 10 s for 1: about 20 s left
        bar.advance(task)                                   # 30 s for 2: about 15 s left
    lines = stream.getvalue().splitlines()
    assert lines == ["demo: 1/3 done (first; 10.0 s elapsed, about 20 s left)",
                     "demo: 2/3 done (30.0 s elapsed, about 15 s left)"]


def test_a_redirected_sweep_reports_every_run(tmp_path: Path) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text("policies: [fifo, srtf]\nseeds: 0-1\nworkloads:\n  - kind: gavel\n"
                      "    jobs: 20\n    cluster: \"2:2:2\"\n    loads: [6]\n"
                      "options:\n  format: csv\n")
    log = tmp_path / "log.txt"
    with open(log, "w") as handle:
        done = subprocess.run([sys.executable, "-m", "schedlab", "sweep", str(config),
                               "--workers", "1", "--out", str(tmp_path / "out")],
                              stdout=handle, stderr=subprocess.STDOUT, timeout=300)
    assert done.returncode == 0
    counts = re.findall(r": (\d)/4 done \(", log.read_text())
    assert counts == ["1", "2", "3", "4"]
