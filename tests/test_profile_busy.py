"""A profile notices a busy host: each cell records the load average and the CPU other
processes used while it ran, and a cell measured beside a busy loop carries the warning."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schedlab.profiler import hostload

torch = pytest.importorskip("torch")


def test_foreign_cores_by_hand() -> None:
    # 4 CPUs; over the cell 1000 jiffies passed in all, 750 of them busy: 3 cores busy on
    # average; the cell itself keeps 1 busy, so others used 2
    before = hostload.CpuSample(busy=100, total=1000, cpus=4)
    after = hostload.CpuSample(busy=850, total=2000, cpus=4)
    assert hostload.foreign_cores(before, after, own_cores=1.0) == pytest.approx(2.0)
    assert hostload.foreign_cores(before, after, own_cores=4.0) == 0.0
    assert hostload.foreign_cores(None, after, 1.0) is None
    assert hostload.busy_reason(0.4, 1.0) is None
    reason = hostload.busy_reason(0.6, 3.0)
    assert reason is not None and "0.60 core(s)" in reason
    assert hostload.busy_reason(None, 9.0, cpus=2) == ("load average 9.00 on 2 CPU(s) while "
                                                        "it was measured")


def _spin(stop: float) -> None:
    while time.monotonic() < stop:
        pass


@pytest.mark.skipif(hostload.sample() is None, reason="needs Linux's /proc/stat")
def test_a_cell_measured_beside_a_busy_loop_carries_the_warning(tmp_path: Path) -> None:
    from schedlab.profiler.matrix import Settings
    from schedlab.profiler.run import CampaignOptions, Device, run_campaign
    from schedlab.profiler.zoo import parse_job_name

    cpus = os.cpu_count() or 1
    stop = time.monotonic() + 60.0
    spinners = [multiprocessing.get_context("spawn").Process(target=_spin, args=(stop,),
                                                             daemon=True)
                for _ in range(cpus)]
    for process in spinners:
        process.start()
    try:
        time.sleep(1.0)  # the spinners are running
        options = CampaignOptions(jobs=(parse_job_name("lstm/tiny@16"),),
                                  devices=(Device("cpu", "cpu"),),
                                  settings=Settings(warmup_steps=2, min_steps=5, max_steps=50,
                                                    max_seconds=1.0))
        result = run_campaign(options, tmp_path / "throughputs.json")
    finally:
        for process in spinners:
            process.terminate()
            process.join(5)
    (cell,) = result.measured
    assert cell.foreign_cores is not None and cell.foreign_cores >= 0.5
    assert cell.host_busy is not None and "other processes used" in cell.host_busy
    written = (tmp_path / "throughputs.json").read_text()
    assert '"host_busy": "other processes used' in written


def _profile_args(out: Path) -> list[str]:
    return [sys.executable, "-m", "schedlab", "profile", "--models", "lstm,recommender",
            "--batch-sizes", "16", "--warmup-steps", "2", "--max-seconds", "0.5",
            "--out", str(out)]


def test_a_redirected_profile_writes_a_line_per_cell_as_it_goes(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    with open(log, "w") as handle:
        process = subprocess.Popen(_profile_args(tmp_path / "t.json"), stdout=handle,
                                   stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            first_seen_running = False
            while time.monotonic() < deadline and process.poll() is None:
                if log.read_text().startswith("cell solo:lstm/tiny@16:cpu:1: ok "):
                    first_seen_running = process.poll() is None
                    break
                time.sleep(0.05)
            assert process.wait(timeout=120) == 0
        finally:
            if process.poll() is None:
                process.kill()
    lines = [line for line in log.read_text().splitlines() if line.startswith("cell ")]
    assert [line.split(":")[1] for line in lines] == ["lstm/tiny@16", "recommender/tiny@16"]
    assert first_seen_running  # the first cell's line was there before the run ended


def test_check_re_times_cells_and_counts_drift(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    assert subprocess.run(_profile_args(out), capture_output=True, timeout=180).returncode == 0
    done = subprocess.run([sys.executable, "-m", "schedlab", "profile", "--check", str(out),
                           "--check-cells", "2"], capture_output=True, text=True, timeout=180)
    lines = done.stdout.splitlines()
    cells = [line for line in lines if line.startswith("cell solo:")]
    assert len(cells) == 2 and all(" -> " in line and "steps/s" in line for line in cells)
    drifted = sum("drifted" in line for line in cells)
    assert lines[-1].startswith(f"{drifted} of 2 re-timed cell(s) moved more than 10%")
    assert done.returncode == (1 if drifted else 0)


def test_profile_without_its_options_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "schedlab", "profile", "--models", "lstm",
                           "--out", str(tmp_path / "t.json")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--batch-sizes" in done.stderr
