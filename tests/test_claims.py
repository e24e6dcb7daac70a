"""Claims (schedlab.claims): runners sharing a folder compute each run or cell once.

Two runner processes (forked, so they are separate pids with a process pool each) go through
one sweep or one set of table cells; a recording runner appends one line per computation to
a log, which must list every run exactly once.  Stale claims (a dead pid, a reused pid, an
unreadable file left long ago) are taken over, live ones are respected until their result
appears or their owner dies, and an interrupted runner leaves no claim behind.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import pytest

from schedlab import claims
from schedlab.analysis import sweep
from schedlab.analysis.experiments.kind import TableKind
from schedlab.analysis.experiments.runner import run_cells
from schedlab.analysis.sweep import RunOutput, RunSpec, WorkloadSpec
from schedlab.claims import Claim, ClaimQueue, Owner, acquire, claim_file, holder_of

SMALL = WorkloadSpec(kind="gavel", num_jobs=3, cluster=(("v100", 2),))
#: environment variable naming the log every computation appends a line to
LOG_ENV = "SCHEDLAB_TEST_CLAIMS_LOG"


@pytest.fixture(autouse=True)
def fast_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claims, "POLL_S", 0.05)


def record(key: str) -> None:
    """Append ``key`` to the computation log (one small O_APPEND write: atomic)."""
    fd = os.open(os.environ[LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def computed(log: Path) -> Counter[str]:
    """How many times each key was computed."""
    if not log.exists():
        return Counter()
    return Counter(line.split()[0] for line in log.read_text().splitlines())


def recording_runner(spec: RunSpec) -> RunOutput:
    """A stand-in simulation: records the run, takes 0.1 s; seed 99 is interrupted."""
    if spec.seed == 99:
        raise KeyboardInterrupt
    record(spec.key)
    time.sleep(0.1)
    return RunOutput(jobs=pd.DataFrame({"job": ["a"], "jct": [1.0]}))


def specs(count: int) -> list[RunSpec]:
    return sweep.plan_runs(["fifo"], [6.0], list(range(count)), SMALL)


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "computed.log"
    monkeypatch.setenv(LOG_ENV, str(path))
    return path


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def write_claim(path: Path, pid: int, *, host: str | None = None,
                started: str | None = None) -> None:
    owner = Owner(pid=pid, host=host or socket.gethostname(), started=started,
                  token="someone-else", created=time.time())
    path.write_text(json.dumps(asdict(owner)))


# ------------------------------------------------------------------------ the claim file


def test_a_claim_is_exclusive_and_released_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "run.csv.claim"
    claim = acquire(path)
    assert claim is not None
    holder = holder_of(path)
    assert holder is not None and holder.pid == os.getpid()
    assert holder.host == socket.gethostname()
    assert acquire(path) is None  # held by a live process (this one)
    other = Claim(path, Owner.me())
    other.release()  # not its claim: left alone
    assert path.exists()
    claim.release()
    assert not path.exists()
    claim.release()  # twice is harmless


def test_a_claim_of_a_dead_pid_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "run.csv.claim"
    write_claim(path, dead_pid())
    claim = acquire(path)
    assert claim is not None and claim.owner.pid == os.getpid()
    assert holder_of(path) == claim.owner
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no grave left


def test_a_reused_pid_is_not_the_owner(tmp_path: Path) -> None:
    path = tmp_path / "run.csv.claim"
    write_claim(path, os.getpid(), started="1")  # this pid, but started at another time
    assert acquire(path) is not None


def test_a_claim_of_another_host_is_respected(tmp_path: Path) -> None:
    path = tmp_path / "run.csv.claim"
    write_claim(path, dead_pid(), host="another-host.invalid")
    assert acquire(path) is None


def test_a_claim_of_another_pid_namespace_is_respected(tmp_path: Path) -> None:
    path = tmp_path / "run.csv.claim"
    owner = Owner(pid=dead_pid(), host=socket.gethostname(), started=None, token="x",
                  created=time.time(), namespace="pid:[1]")  # another container
    path.write_text(json.dumps(asdict(owner)))
    assert acquire(path) is None


def test_an_unreadable_claim_is_respected_until_the_grace_period_ends(tmp_path: Path) -> None:
    path = tmp_path / "run.csv.claim"
    path.write_bytes(b"")  # created, not written yet
    assert acquire(path) is None
    old = time.time() - claims.UNREADABLE_GRACE_S - 1
    os.utime(path, (old, old))
    assert acquire(path) is not None


def test_taking_over_never_removes_a_fresh_claim(tmp_path: Path) -> None:
    """The race: the stale claim was replaced by a live one after it was judged stale."""
    path = tmp_path / "run.csv.claim"
    write_claim(path, dead_pid())
    seen = path.read_bytes()
    fresh = acquire(tmp_path / "other.claim")
    assert fresh is not None
    os.replace(fresh.path, path)  # a live runner took it over first
    claims._clear_stale(path, seen, Owner.parse(seen))
    assert holder_of(path) == fresh.owner
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


# ---------------------------------------------------------------------------- sweeps


def _sweep_runner(folder: str, count: int, workers: int, report: str) -> None:
    result = sweep.run_sweep(specs(count), folder, workers=workers, fmt="csv", progress=False,
                             runner=recording_runner)
    Path(report).write_text(json.dumps({"ran": len(result.ran), "skipped": len(result.skipped),
                                        "files": len(result.files)}))


def run_forked(target: object, runs: list[tuple[object, ...]]) -> None:
    """Run ``target(*args)`` for each args, all at once in forked processes."""
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=target, args=args) for args in runs]  # type: ignore[attr-defined]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0


@pytest.mark.parametrize("workers", [1, 2])
def test_two_sweeps_into_one_folder_compute_each_run_once(workers: int, tmp_path: Path,
                                                          log: Path) -> None:
    folder = tmp_path / "out"
    count = 10
    run_forked(_sweep_runner, [(str(folder), count, workers, str(tmp_path / f"r{i}.json"))
                               for i in range(2)])
    keys = {spec.key for spec in specs(count)}
    assert computed(log) == Counter(dict.fromkeys(keys, 1))
    reports = [json.loads((tmp_path / f"r{i}.json").read_text()) for i in range(2)]
    assert sum(r["ran"] for r in reports) == count
    assert all(r["ran"] > 0 for r in reports)  # they shared the work
    assert all(r["ran"] + r["skipped"] == r["files"] == count for r in reports)
    assert sorted(p.stem for p in folder.iterdir()) == sorted(keys)  # no claim left


def test_a_sweep_takes_over_the_stale_claim_of_a_killed_sweep(tmp_path: Path,
                                                              log: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    runs = specs(2)
    write_claim(claim_file(folder / runs[0].key), dead_pid())
    report = sweep.run_sweep(runs, folder, fmt="csv", progress=False, runner=recording_runner)
    assert len(report.ran) == 2
    assert computed(log) == Counter({runs[0].key: 1, runs[1].key: 1})
    assert not list(folder.glob("*.claim"))


def test_a_live_claim_is_waited_for_then_taken_over_when_its_owner_dies(
        tmp_path: Path, log: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    runs = specs(3)
    owner = subprocess.Popen(["sleep", "60"])
    try:
        write_claim(claim_file(folder / runs[0].key), owner.pid)
        write_claim(claim_file(folder / runs[1].key), owner.pid)
        reports: list[sweep.SweepReport] = []
        runner = threading.Thread(target=lambda: reports.append(sweep.run_sweep(
            runs, folder, fmt="csv", progress=False, runner=recording_runner)))
        runner.start()
        time.sleep(0.8)
        assert runner.is_alive()  # waiting for the two claimed runs
        assert computed(log) == Counter({runs[2].key: 1})
        # the owner finishes run 0 (its result appears) and dies before run 1
        sweep.write_frame_atomic(pd.DataFrame({"job": ["a"]}), folder / f"{runs[0].key}.csv")
        claim_file(folder / runs[0].key).unlink()
    finally:
        owner.kill()
        owner.wait()
    runner.join(timeout=20)
    assert not runner.is_alive()
    (report,) = reports
    assert [s.key for s in report.ran] == [runs[2].key, runs[1].key]
    assert [s.key for s in report.skipped] == [runs[0].key]
    assert set(report.files) == {s.key for s in runs}
    assert computed(log) == Counter({runs[2].key: 1, runs[1].key: 1})
    assert not list(folder.glob("*.claim"))


@pytest.mark.parametrize("workers", [1, 2])
def test_an_interrupted_sweep_removes_its_claims_and_keeps_its_results(
        workers: int, tmp_path: Path, log: Path) -> None:
    folder = tmp_path / "out"
    runs = [*specs(3), *sweep.plan_runs(["fifo"], [6.0], [99], SMALL)]
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(runs, folder, workers=workers, fmt="csv", progress=False,
                        runner=recording_runner)
    assert not list(folder.glob("*.claim"))
    finished = {p.stem for p in folder.glob("*.csv")}
    assert finished == set(computed(log))
    assert finished  # at least the first run finished before the interrupt


# ------------------------------------------------------------------------------ tables


@dataclass(frozen=True)
class Cell:
    seed: int

    @property
    def file_name(self) -> str:
        return f"cell-{self.seed}.json"


def run_cell(cell: Cell) -> int:
    record(cell.file_name)
    time.sleep(0.1)
    return cell.seed * 10


def _kind() -> TableKind:
    return TableKind(name="toy", settings=lambda spec: None, plan=lambda settings: [],
                     compute=run_cell, dump=lambda value: {"value": value},
                     load=lambda data: int(data["value"]), key=lambda cell: cell.seed,
                     describe=lambda cell: f"cell {cell.seed}",
                     reduce=lambda settings, results: results, document=lambda table: None,
                     frame=lambda table: None, seeds=lambda settings: [])


def _table_runner(folder: str, count: int, report: str) -> None:
    results = run_cells(_kind(), [Cell(i) for i in range(count)], Path(folder), workers=2)
    Path(report).write_text(json.dumps(sorted(results.items())))


def test_two_tables_into_one_folder_compute_each_cell_once(tmp_path: Path, log: Path) -> None:
    folder = tmp_path / "cells"
    count = 10
    run_forked(_table_runner, [(str(folder), count, str(tmp_path / f"t{i}.json"))
                               for i in range(2)])
    assert computed(log) == Counter({Cell(i).file_name: 1 for i in range(count)})
    for i in range(2):
        results = json.loads((tmp_path / f"t{i}.json").read_text())
        assert results == [[seed, seed * 10] for seed in range(count)]
    assert not list(folder.glob("*.claim"))


def test_the_queue_hands_out_items_in_order_and_finds_results(tmp_path: Path) -> None:
    done: dict[int, str] = {1: "already"}
    found: list[tuple[int, str]] = []
    queue: ClaimQueue[int, str] = ClaimQueue(
        [0, 1, 2], claim_path=lambda i: tmp_path / f"{i}.claim", done=done.get,
        found=lambda i, r: found.append((i, r)), describe=str)
    first = queue.take()
    assert first is not None and first[0] == 0 and queue.held == 1
    second = queue.take()
    assert second is not None and second[0] == 2 and found == [(1, "already")]
    assert queue.take() is None and not queue
    queue.release(first[1])
    queue.release_all()
    assert queue.held == 0 and not list(tmp_path.iterdir())
