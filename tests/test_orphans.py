"""Pool workers die with their main process, even one killed by SIGKILL (schedlab.orphans).

Real processes: a watchdog watching a ``sleep`` process, a tiny pool under each start method,
and a real ``schedlab sweep --workers 2`` killed while its workers simulate.  Descendants are
found by scanning ``/proc`` (Linux only).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from schedlab.orphans import ORPHAN_EXIT, proc_stat, process_alive

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="needs /proc (Linux)")

#: seconds the workers may take to die after their main process is killed
DEADLINE_S = 10.0


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` (children, grandchildren, ...)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = proc_stat(int(entry.name))
            if fields and fields[0] not in ("Z", "X"):
                parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def reap() -> Iterator[list[int]]:
    """Pids to SIGKILL at the end if a test leaves them alive (its own processes only)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def kill_and_check(main: subprocess.Popen[bytes], workers: set[int]) -> None:
    """SIGKILL ``main``; every process of ``workers`` must be gone within DEADLINE_S."""
    main.kill()
    main.wait()
    try:
        wait_for(lambda: not any(process_alive(pid) for pid in workers), DEADLINE_S,
                 "the workers to die")
    except AssertionError:
        alive = sorted(pid for pid in workers if process_alive(pid))
        raise AssertionError(f"worker(s) {alive} outlived their main process") from None


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "polling"])
def test_watchdog_ends_the_process_when_the_watched_one_ends(use_pidfd: bool,
                                                             reap: list[int]) -> None:
    watched = subprocess.Popen(["sleep", "60"])
    reap.append(watched.pid)
    code = textwrap.dedent(f"""
        import sys, time
        from schedlab.orphans import start_watchdog
        start_watchdog({watched.pid}, poll_s=0.05, use_pidfd={use_pidfd})
        print("ready", flush=True)
        time.sleep(60)
        sys.exit(3)
    """)
    watcher = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    reap.append(watcher.pid)
    assert watcher.stdout is not None and watcher.stdout.readline() == b"ready\n"
    time.sleep(0.2)
    assert watcher.poll() is None  # the watched process still runs: so does the watcher
    watched.kill()
    watched.wait()
    assert watcher.wait(timeout=5) == ORPHAN_EXIT


POOL_SCRIPT = """
import multiprocessing, os, sys, time
from pathlib import Path
from schedlab.orphans import process_pool

def work(folder):
    (Path(folder) / str(os.getpid())).write_text("")
    time.sleep(60)

if __name__ == "__main__":
    method, folder = sys.argv[1], sys.argv[2]
    pool = process_pool(2, mp_context=multiprocessing.get_context(method))
    futures = [pool.submit(work, folder) for _ in range(2)]
    time.sleep(60)
"""


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_pool_workers_die_with_a_killed_main_process(method: str, tmp_path: Path,
                                                     reap: list[int]) -> None:
    script = tmp_path / "pool_main.py"
    script.write_text(POOL_SCRIPT)
    started = tmp_path / "started"
    started.mkdir()
    main = subprocess.Popen([sys.executable, str(script), method, str(started)],
                            start_new_session=True)
    reap.append(main.pid)
    wait_for(lambda: len(list(started.iterdir())) == 2, 20, "two busy workers")
    workers = {int(p.name) for p in started.iterdir()}
    everything = descendants(main.pid)  # the fork server and resource tracker too
    reap.extend(everything)
    assert workers <= everything
    kill_and_check(main, everything)


PROFILER_SCRIPT = """
import os, sys, time
from pathlib import Path
from schedlab.profiler.workers import run_workers

def work(payload):
    (Path(payload["folder"]) / str(os.getpid())).write_text("")
    time.sleep(60)

if __name__ == "__main__":
    run_workers(work, [{"folder": sys.argv[1]}] * 2, timeout_s=120)
"""


def test_profiler_workers_die_with_a_killed_profiler(tmp_path: Path, reap: list[int]) -> None:
    pytest.importorskip("torch")  # the fork server preloads it
    script = tmp_path / "profiler_main.py"
    script.write_text(PROFILER_SCRIPT)
    started = tmp_path / "started"
    started.mkdir()
    main = subprocess.Popen([sys.executable, str(script), str(started)],
                            start_new_session=True)
    reap.append(main.pid)
    wait_for(lambda: len(list(started.iterdir())) == 2, 60, "two busy workers")
    everything = descendants(main.pid)
    reap.extend(everything)
    assert {int(p.name) for p in started.iterdir()} <= everything
    kill_and_check(main, everything)


SWEEP = """\
policies: [fifo, srtf]
seeds: 0-9
workloads:
  - kind: gavel
    jobs: 400
    cluster: "4:4:4"
    loads: [30]
options:
  format: csv
"""


def test_sweep_workers_die_with_a_killed_sweep(tmp_path: Path, reap: list[int]) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text(SWEEP)
    out = tmp_path / "out"
    main = subprocess.Popen(
        [sys.executable, "-m", "schedlab", "sweep", str(config), "--workers", "2",
         "--out", str(out), "-q"],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reap.append(main.pid)
    wait_for(lambda: len(descendants(main.pid)) >= 2, 20, "the sweep's pool workers")
    time.sleep(0.5)  # simulating
    workers = descendants(main.pid)
    reap.extend(workers)
    assert main.poll() is None, "the sweep ended before it was killed"
    kill_and_check(main, workers)
    # the claims of the killed sweep are stale: a rerun takes them over (tests/test_claims.py)
    assert all(p.suffix in (".csv", ".claim") for p in out.iterdir())
