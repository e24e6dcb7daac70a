"""The experiment runner from the command line: the old table commands and the spec path give
the same tables, the local and the Ray backend the same cells, and an interrupted run (SIGINT,
or SIGKILL of the runner) loses no finished cell and computes none again."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import default_sigint

from schedlab.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "experiment-titan48.yaml"
#: The papers whose table tests do not already run both paths on shared cells (gavel, hare
#: and shockwave do, in their quick_run fixtures).
PAPERS = ("saturn", "titan", "cross")
#: Timing fields of a cell (wall-clock measurements, the only values that may differ).
TIMING = ("wall_s", "solver_time_s", "solve_s", "cpu_s", "seconds")


def _run(*args: str) -> tuple[int, str]:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(list(args))
    return code, buffer.getvalue()


def _cells(folder: Path) -> dict[str, int]:
    """Cell file name -> modification time (ns)."""
    return {p.name: p.stat().st_mtime_ns for p in (folder / "cells").glob("*.json")}


@pytest.mark.parametrize("paper", PAPERS)
def test_old_command_and_spec_path_make_the_same_table(paper: str, tmp_path: Path) -> None:
    """``tables PAPER --quick`` (the command as before) and the spec it prints with
    ``experiment show PAPER --quick``, run by ``sweep``, plan the same cells (the second run
    finds every cell of the first and computes none) and write the same Markdown."""
    old = tmp_path / "old"
    code, _ = _run("tables", paper, "--quick", "--workers", "1", "--out", str(old), "-q")
    assert code == 0
    code, text = _run("experiment", "show", paper, "--quick")
    assert code == 0 and "variants" not in text
    spec = tmp_path / f"{paper}.yaml"
    spec.write_text(text, encoding="utf-8")
    new = tmp_path / "new"
    shutil.copytree(old / "cells", new / "cells")
    before = _cells(new)
    assert before
    code, _ = _run("sweep", str(spec), "--out", str(new), "-q")
    assert code == 0
    assert _cells(new) == before  # no cell added or written again
    assert (new / f"{paper}.md").read_text() == (old / f"{paper}.md").read_text()
    assert (new / f"{paper}.csv").read_text() == (old / f"{paper}.csv").read_text()


def test_old_flags_become_overrides_and_errors_name_the_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _run("experiment", "show", "titan", "--variant", "generated_quick",
                      "--set", "workloads[0].params.gpus=24")
    assert code == 0 and "gpus: 24" in text
    assert main(["tables", "titan", "--preset", "generated", "--quick", "--gpus", "18",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--gpus" in err and "whole nodes of 4" in err
    assert not any(tmp_path.iterdir())


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def test_local_and_ray_backends_give_identical_cells(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented example (Titan's Table 3 with FIFO on 48 GPUs), one seed, on the local
    pool and on a local Ray: the same cell files with the same content (timings aside)."""
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    local, ray = tmp_path / "local", tmp_path / "ray"
    assert main(["sweep", str(EXAMPLE), "--set", "seeds=[0]", "--workers", "2",
                 "--out", str(local), "-q"]) == 0
    assert main(["sweep", str(EXAMPLE), "--set", "seeds=[0]", "--workers", "2",
                 "--backend", "ray", "--out", str(ray), "-q"]) == 0
    names = sorted(_cells(local))
    assert names == sorted(_cells(ray)) and len(names) == 5
    for name in names:
        mine = json.loads((local / "cells" / name).read_text())
        theirs = json.loads((ray / "cells" / name).read_text())
        assert _strip(mine) == _strip(theirs), name
    manifest = json.loads((ray / "titan48.manifest.json").read_text())
    assert manifest["experiment"]["run"]["backend"] == "ray"


def _start(out: Path, workers: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "schedlab", "sweep", str(EXAMPLE), "--workers", str(workers),
         "--out", str(out), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, preexec_fn=default_sigint)


def _wait_for_cells(out: Path, process: subprocess.Popen[bytes], count: int,
                    timeout: float = 240.0) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _cells(out)
        if len(found) >= count:
            return found
        if process.poll() is not None:
            pytest.fail(f"the run ended before {count} cells: {process.stderr.read()!r}")
        time.sleep(0.05)
    pytest.fail(f"no {count} cells within {timeout} s")


@pytest.mark.parametrize(("sig", "workers"), [(signal.SIGINT, 1), (signal.SIGKILL, 2)])
def test_interrupted_run_loses_no_cell_and_recomputes_none(
        sig: signal.Signals, workers: int, tmp_path: Path) -> None:
    out = tmp_path / "run"
    process = _start(out, workers)
    try:
        _wait_for_cells(out, process, 2)
        os.kill(process.pid, sig)
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert code == (130 if sig == signal.SIGINT else -signal.SIGKILL)
    time.sleep(0.5)  # a killed runner's workers end by themselves (their watchdog)
    finished = _cells(out)
    assert 2 <= len(finished) < 10
    again = subprocess.run(
        [sys.executable, "-m", "schedlab", "sweep", str(EXAMPLE), "--workers", "2",
         "--out", str(out), "-q"], capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr
    after = _cells(out)
    assert len(after) == 10
    for name, stamp in finished.items():
        assert after[name] == stamp, f"{name} was computed again"
    assert not list((out / "cells").glob("*.claim"))
