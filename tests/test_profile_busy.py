"""A profile notices a busy host: each cell records the load average and the CPU other
processes used while it ran, and a cell measured beside a busy loop carries the warning."""

from __future__ import annotations

import multiprocessing
import os
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
