"""Ctrl-C (SIGINT to the command's process) ends every long command the same way: exit 130
within 5 s, one line on stderr, finished work kept (tables, sweeps) and nothing half-written
(solve).  Each command runs as a real process; SIGINT is sent once it is busy."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import default_sigint
from test_orphans import SWEEP  # the same small sweep: 20 gavel runs

ROOT = Path(__file__).resolve().parents[1]
#: The small heterogeneous cluster of benchmarks/hare_scale.py.
HARE_CLUSTER = {"k80": 2, "p100": 1, "v100": 1}


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "schedlab", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=default_sigint)


def _wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _interrupt(process: subprocess.Popen[str]) -> tuple[float, str]:
    """SIGINT to the process; (seconds until it exited, its stderr)."""
    assert process.poll() is None, "the command ended before it was interrupted"
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    return time.monotonic() - sent, err


def _diagnostics(err: str) -> list[str]:
    """stderr without the progress lines (``<what>: N/M done (...)``, schedlab.progress)."""
    return [line for line in err.splitlines()
            if line.strip() and not re.match(r"^[\w ]+: [\d.]+(/[\d.]+)? done \(", line)]


def _assert_one_line_130(process: subprocess.Popen[str], took: float, err: str) -> None:
    assert process.returncode == 130, (process.returncode, err)
    assert took < 5.0, took
    lines = _diagnostics(err)
    assert len(lines) == 1 and lines[0].startswith("error: interrupted"), err


def test_solve_of_a_saturn_milp_stops_at_once_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "solution.json"
    process = _start(["solve", str(ROOT / "instances/saturn/random-16jobs-2x8.json"), "-f",
                      "saturn.time_indexed", "--out", str(out)], tmp_path)
    time.sleep(4.0)  # past the imports and the model build: HiGHS is branching
    took, err = _interrupt(process)
    _assert_one_line_130(process, took, err)
    assert not out.exists()
    assert not list(tmp_path.glob("*.tmp*"))


def test_simulate_stops_with_130(tmp_path: Path) -> None:
    process = _start(["simulate", "--policy", "fifo", "--jobs", "100000", "--jobs-per-hour",
                      "30", "--cluster", "36:36:36", "-q"], tmp_path)
    time.sleep(3.0)
    took, err = _interrupt(process)
    _assert_one_line_130(process, took, err)


def test_tables_keep_finished_cells(tmp_path: Path) -> None:
    out = tmp_path / "titan"
    process = _start(["tables", "titan", "--quick", "--workers", "1", "--out", str(out)],
                     tmp_path)
    cells = out / "cells"
    _wait_for(lambda: cells.is_dir() and any(cells.glob("*.json")), 60, "a finished cell")
    took, err = _interrupt(process)
    _assert_one_line_130(process, took, err)
    kept = list(cells.glob("*.json"))
    assert kept and all(path.read_text().startswith("{") for path in kept)
    assert not list(cells.glob("*.claim"))


@pytest.mark.parametrize("workers", [1, 2])
def test_sweep_keeps_finished_runs(tmp_path: Path, workers: int) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text(SWEEP)
    out = tmp_path / "out"
    process = _start(["sweep", str(config), "--workers", str(workers), "--out", str(out),
                      "-q"], tmp_path)
    _wait_for(lambda: out.is_dir() and any(out.glob("*.csv")), 60, "a finished run")
    took, err = _interrupt(process)
    _assert_one_line_130(process, took, err)
    assert list(out.glob("*.csv")) and not list(out.glob("*.claim"))


def _one_line_interrupted(process: subprocess.Popen[str], took: float, err: str) -> None:
    """Exit 130 within 5 s and one stderr line that says it was interrupted."""
    assert process.returncode == 130, (process.returncode, err)
    assert took < 5.0, took
    lines = _diagnostics(err)
    assert len(lines) == 1 and "interrupted" in lines[0], err


def test_profile_keeps_finished_cells(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "t.json"
    # Every cell times for its full second (--min-steps far above a second's steps): the
    # six cells then take 6 s or more after the first, and the interrupt cannot arrive as
    # the process ends (the tiny models' cells otherwise stop after a few steps, the run
    # ended within a second of the first cell, and an interrupt at the exit killed the
    # interpreter during its teardown: exit -2, not the command's 130).
    process = _start(["profile", "--models", "lstm,recommender,transformer", "--batch-sizes",
                      "16,64", "--warmup-steps", "2", "--min-steps", "100000",
                      "--max-steps", "100000", "--max-seconds", "1", "--out", str(out),
                      "-q"], tmp_path)
    _wait_for(lambda: out.exists() and '"status": "ok"' in out.read_text(), 120,
              "a finished cell")
    took, err = _interrupt(process)
    _one_line_interrupted(process, took, err)
    import json

    cells = json.loads(out.read_text())["cells"]
    assert cells and all(cell["status"] == "ok" for cell in cells)


def test_replay_stops_with_130(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from schedlab.cli import main

    assert main(["profile", "--models", "lstm", "--batch-sizes", "16", "--warmup-steps", "2",
                 "--max-seconds", "0.3", "--out", str(tmp_path / "t.json"), "-q"]) == 0
    assert main(["profile-instance", str(tmp_path / "t.json"), "--paper", "gavel", "--jobs",
                 "2", "--duration-s", "20,30", "--round-s", "30", "--out",
                 str(tmp_path / "i.json"), "-q"]) == 0
    assert main(["solve", str(tmp_path / "i.json"), "-f", "gavel.max_min_fairness",
                 "--rounds", "10", "--out", str(tmp_path / "s.json"), "-q"]) == 0
    process = _start(["replay", str(tmp_path / "s.json"), "--instance",
                      str(tmp_path / "i.json"), "--time-scale", "1", "--checkpoint-every",
                      "1", "--workdir", str(tmp_path / "work"), "--out",
                      str(tmp_path / "r.json"), "-q"], tmp_path)
    # the first checkpoint comes a wall second into the jobs' 20-30 s of work: mid-replay
    _wait_for(lambda: any((tmp_path / "work").rglob("*.ckpt")), 120, "a checkpoint")
    took, err = _interrupt(process)
    _one_line_interrupted(process, took, err)
    assert not (tmp_path / "r.json").exists()


def test_solve_on_cp_sat_stops_at_once_and_writes_nothing(tmp_path: Path) -> None:
    """hare.exact (CP-SAT) on an 18-task instance it does not prove in seconds."""
    pytest.importorskip("ortools")
    from schedlab.instance import save_instance
    from schedlab.workloads.hare import generate_hare_instance

    def tasks(instance: object) -> int:
        return sum((j.rounds or 0) * (j.tasks_per_round or 0)
                   for j in instance.jobs)  # type: ignore[attr-defined]

    instance = next(
        inst for seed in range(500) for jobs in range(3, 10)
        if tasks(inst := generate_hare_instance(
            jobs, seed=seed, cluster=HARE_CLUSTER, rounds=(1, 3),
            tasks_per_round={1: 1.0, 2: 1.0, 4: 1.0}, switch="default")) == 18)
    path = tmp_path / "hare18.json"
    save_instance(instance, path)
    out = tmp_path / "solution.json"
    process = _start(["solve", str(path), "-f", "hare.exact", "--time-limit", "120",
                      "--out", str(out)], tmp_path)
    time.sleep(5.0)
    took, err = _interrupt(process)
    _assert_one_line_130(process, took, err)
    assert not out.exists()
