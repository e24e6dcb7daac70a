"""Replay faults found by fault injection: a wall-clock replay survives a killed worker (the
restart does not block the loop, and a replacement is not called hung for its start-up);
``--resume`` believes verified checkpoint contents, never file names, and skips a refused
payload; a bad journal and a missing torch are one error line, exit 2.

Workers are real (spawned, torch imported); the wall-mode tests run rounds of 0.3 wall
seconds (3 s at time scale 10), so that a replacement's start-up (seconds on two cores)
spans several of its segments and of the other slot's.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from schedlab.cli import main  # noqa: E402
from schedlab.executor.backends import Backend, WorkerFailed  # noqa: E402
from schedlab.executor.plan import Segment  # noqa: E402
from schedlab.executor.replay import (  # noqa: E402
    JOURNAL,
    JOURNAL_SCHEMA,
    MAX_GANG_FAULTS,
    Hooks,
    read_journal,
)
from schedlab.executor.run import run_replay  # noqa: E402
from schedlab.profiler.checkpoint import (  # noqa: E402
    MAGIC,
    checkpoint_name,
    decode,
    list_checkpoints,
    load_latest,
    save_checkpoint,
)
from schedlab.profiler.zoo import TrainingJob, parse_job_name  # noqa: E402

A, B = "lstm/tiny@4", "recommender/tiny@8"
# a: 10 steps on cpu:0, preempted a round, 10 on cpu:1, 5 more there (stays resident);
# b: 10 on cpu:1, moves to cpu:0 for 10, stays for its last 10.
PLAN = [[("a", [0]), ("b", [1])], [("b", [0])], [("a", [1]), ("b", [0])], [("a", [1])]]


def _write(tmp: Path, rounds: list[list[tuple[str, list[int]]]], *, jobs: dict[str, str],
           steps: dict[str, int], throughput: dict[str, float], round_s: float = 1.0
           ) -> tuple[Path, Path]:
    instance = {"schema": "schedlab/instance@1",
                "cluster": {"accelerators": {"cpu": {"count": 2}}},
                "jobs": [{"id": job, "job_type": kind, "total_steps": steps[job],
                          "throughput": {"cpu": throughput[job]}}
                         for job, kind in jobs.items()],
                "params": {"round_s": round_s}}
    solution = {"schema": "schedlab/solution@1", "instance": {"name": "t", "hash": ""},
                "formulation": "manual", "status": "feasible",
                "rounds": [[{"job": j, "accelerator": "cpu", "gpus": len(ids), "gpu_ids": ids}
                            for j, ids in r] for r in rounds]}
    (tmp / "instance.json").write_text(json.dumps(instance))
    (tmp / "solution.json").write_text(json.dumps(solution))
    return tmp / "solution.json", tmp / "instance.json"


def _reference(name: str, seed: int, steps: int) -> dict[str, Any]:
    """Parameters of an uninterrupted run (the executor seeds job i with 1000 i)."""
    torch.set_num_threads(1)
    with torch.random.fork_rng(devices=[]):
        job = TrainingJob(parse_job_name(name), seed=seed)
        for _ in range(steps):
            job.step()
    return job.model.state_dict()  # type: ignore[no-any-return]


def _same(left: dict[str, Any], right: dict[str, Any]) -> bool:
    return left.keys() == right.keys() and all(torch.equal(left[k], right[k]) for k in left)


def _signed(payload: bytes) -> bytes:
    """``payload`` under a valid schedlab checkpoint header (its checksum holds)."""
    return MAGIC + b" " + hashlib.sha256(payload).hexdigest().encode("ascii") + b"\n" + payload


class _Refused:
    """Pickled by reference: ``torch.load(weights_only=True)`` refuses to build it."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("this must never run",))


def _refused_checkpoint(steps: int) -> bytes:
    buffer = io.BytesIO()
    torch.save({"steps_done": steps, "model": _Refused()}, buffer)
    return _signed(buffer.getvalue())


# ------------------------------------------------------------------------------ wall mode


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["SIGKILL", "SIGSTOP"])
def test_wall_mode_fault_finishes_every_job(tmp_path: Path, sig: signal.Signals) -> None:
    """Two jobs, one per slot, rounds of 0.3 wall s (3 s at time scale 10); a's worker is
    killed (or stopped: the watchdog calls it hung 2 s after its segment's end) 0.1 s into
    its third round.  Before the fix the replay restarted synchronously (spawn + torch
    import + warm-up: 2-3 s here), so a's next segments were launched seconds after their
    end with a deadline already past: each was called hung at once and its restart blocked
    again (dozens of faults, no job finished)."""
    every = 0.2
    scale = 10.0
    rounds: list[list[tuple[str, list[int]]]] = [[("a", [0]), ("b", [1])]
                                                 for _ in range(60)]
    solution, instance = _write(tmp_path, rounds, jobs={"a": "lstm/tiny@32", "b": B},
                                steps={"a": 600, "b": 1500},
                                throughput={"a": 400.0, "b": 1900.0}, round_s=3.0)
    hit: list[int] = []

    def started(segment: Segment, pids: list[int]) -> None:
        if segment.job == "a" and segment.round == 2 and not hit:
            hit.append(pids[0])
            threading.Timer(0.1, os.kill, (pids[0], sig)).start()

    report = run_replay(solution, instance, workdir=tmp_path / "work", time_scale=scale,
                        checkpoint_every_s=every, hooks=Hooks(segment_started=started))
    assert hit
    assert all(job.finished for job in report.jobs), [
        (j.job, j.realized_steps, j.faults) for j in report.jobs]
    faults = [f for job in report.jobs for f in job.faults]
    kind = "worker_died" if sig == signal.SIGKILL else "hang"
    assert [f["kind"] for f in faults] == [kind], faults  # no replacement called hung
    (fault,) = faults
    assert fault["steps_reached"] is None or \
        fault["steps_reached"] >= fault["resumed_from_steps"] >= 0
    # lost: what ran after the last checkpoint, at most one interval (plus the step that
    # crossed it and the 20 ms report granularity, under load); lost_s is instance seconds
    if fault["lost_s"] is not None:
        assert fault["lost_s"] / scale <= every + 0.25


# ------------------------------------------------------------------------------ resume


def test_resume_skips_refused_and_misnamed_checkpoints(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """An interrupted steps-mode replay; then a's folder gets a newer checkpoint whose
    checksum holds but whose pickle the restricted unpickler refuses, and b's a stray
    ``step-999999999999.ckpt`` (a copy of b's real checkpoint: valid, but not that step).
    ``replay --resume`` restores both from their last good checkpoint (parameters equal an
    uninterrupted run's), finishes both and reports the files."""
    solution, instance = _write(tmp_path, PLAN, jobs={"a": A, "b": B},
                                steps={"a": 25, "b": 30}, throughput={"a": 10.0, "b": 10.0})
    work = tmp_path / "work"

    def starting(segment: Segment) -> None:
        if segment.round == 2:  # nothing else is in flight then
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_replay(solution, instance, workdir=work, segment_steps=True, checkpoint_every_s=0,
                   hooks=Hooks(segment_starting=starting))
    folder_a, folder_b = work / "checkpoints" / "a", work / "checkpoints" / "b"
    assert [s for s, _ in list_checkpoints(folder_a)] == [10]
    assert [s for s, _ in list_checkpoints(folder_b)] == [10]
    refused = folder_a / checkpoint_name(12)
    refused.write_bytes(_refused_checkpoint(12))
    stray = folder_b / "step-999999999999.ckpt"
    stray.write_bytes((folder_b / checkpoint_name(10)).read_bytes())

    out = tmp_path / "report.json"
    code = main(["replay", str(solution), "--instance", str(instance), "--segment-steps",
                 "--checkpoint-every", "0", "--workdir", str(work), "--resume",
                 "--out", str(out), "-q"])
    assert code == 0
    assert "2/2 jobs finished" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert {j["job"]: j["realized_steps"] for j in report["jobs"]} == {"a": 25, "b": 30}
    for job, bad in (("a", refused), ("b", stray)):
        faults = [f for r in report["segments"] if r["job"] == job for f in r["faults"]
                  if f["kind"] == "corrupt_checkpoint"]
        assert faults == [{"kind": "corrupt_checkpoint", "files": [str(bad)],
                           "resumed_from_steps": 10, "on_resume": True}]
        assert not bad.exists() and bad.with_name(bad.name + ".corrupt").exists()
    final = {job: decode(list_checkpoints(work / "checkpoints" / job)[-1][1].read_bytes())
             for job in ("a", "b")}
    assert _same(final["a"]["model"], _reference(A, 0, 25))
    assert _same(final["b"]["model"], _reference(B, 1000, 30))


def test_load_latest_believes_contents_not_names(tmp_path: Path) -> None:
    job = TrainingJob(parse_job_name(A), seed=0)
    job.step()
    save_checkpoint(tmp_path, job.state(), keep=5)
    good = (tmp_path / checkpoint_name(1)).read_bytes()
    (tmp_path / checkpoint_name(2)).write_bytes(good)  # valid, but the contents say step 1
    (tmp_path / checkpoint_name(3)).write_bytes(_refused_checkpoint(3))
    (tmp_path / checkpoint_name(4)).write_bytes(_signed(b"not a torch archive"))
    restored = load_latest(tmp_path)
    assert restored.state is not None and restored.state["steps_done"] == 1
    assert [p.name for p in restored.corrupt] == [checkpoint_name(s) for s in (4, 3, 2)]
    # a verified checkpoint past the job's work is not believed either
    assert load_latest(tmp_path, max_steps=0).state is None
    with pytest.raises(Exception, match="payload refused"):
        decode(_refused_checkpoint(3))


# ------------------------------------------------------------------------------ journal


def _journal_case(tmp_path: Path, content: bytes) -> tuple[int, str, Path]:
    solution, instance = _write(tmp_path, PLAN, jobs={"a": A, "b": B},
                                steps={"a": 25, "b": 30}, throughput={"a": 10.0, "b": 10.0})
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / JOURNAL).write_bytes(content)
    return main(["replay", str(solution), "--instance", str(instance), "--segment-steps",
                 "--workdir", str(work), "--resume", "-q"]), str(work / JOURNAL), work


@pytest.mark.parametrize(("content", "reason"), [
    (json.dumps({"schema": JOURNAL_SCHEMA}).encode() + b"\n{\"segment\": 0, \"job\": \"\xff\"}\n",
     "not UTF-8"),
    (json.dumps({"schema": "schedlab/replay-journal@2"}).encode() + b"\n",
     "unknown journal schema version"),
    (json.dumps({"schema": "schedlab/solution@1"}).encode() + b"\n", "not a replay journal"),
    (b"[1, 2]\n", "not a replay journal header"),
    (json.dumps({"schema": JOURNAL_SCHEMA}).encode() + b"\n{\"segment\": \"x\"}\n{}\n",
     "line 2: segment must be a whole number"),
])
def test_bad_journal_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        content: bytes, reason: str) -> None:
    code, journal, work = _journal_case(tmp_path, content)
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: {journal}") and reason in err, err
    assert (work / JOURNAL).read_bytes() == content  # left as it was
    assert not (work / "checkpoints").exists()


def test_torn_last_line_is_dropped_and_cut(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL
    header = {"schema": JOURNAL_SCHEMA, "kind": "rounds"}
    record = {"segment": 0, "job": "a", "steps_after": 3, "finish_s": None}
    path.write_text(json.dumps(header) + "\n" + json.dumps(record) + "\n{\"segm")
    assert read_journal(path) == (header, [record])
    from schedlab.executor.replay import _cut_torn_tail

    _cut_torn_tail(path)
    assert path.read_text().endswith("}\n") and read_journal(path) == (header, [record])


# ------------------------------------------------------------------------------ no torch


@pytest.mark.parametrize("command", [
    ["replay", "solution.json", "--instance", "instance.json"],
    ["profile", "--models", "lstm", "--batch-sizes", "16", "--out", "t.json"],
])
def test_no_torch_is_one_line_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str],
                                     command: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as if absent
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err == (f"error: schedlab {command[0]} needs torch, which is not installed: "
                   "pip install torch==2.13.0\n")
    assert not list(tmp_path.iterdir())


def test_no_torch_from_a_fresh_interpreter(tmp_path: Path) -> None:
    """The same through a fresh interpreter, where nothing has imported torch yet."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from schedlab.cli import main\n"
            "sys.exit(main(['replay', 's.json', '--instance', 'i.json']))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: schedlab replay needs torch, which is not installed: pip install torch==2.13.0"]


# ------------------------------------------------------------------------------ gang errors


class _FakeBackend(Backend):
    """Workers that finish every order at once (no torch), except that the first
    ``errors`` orders of rank 1 of a gang raise as a gloo collective does when its peer
    dies: within milliseconds, often before the death is seen."""

    name = "fake"

    def __init__(self, errors: int) -> None:
        self.errors = errors
        self.events: list[Any] = []
        self.restarts: list[Any] = []

    def start(self, slots: list[Any], warm: list[str]) -> None:
        self._started = True

    def submit(self, slot: Any, order: dict[str, Any]) -> None:
        if order["world"] > 1 and order["rank"] == 1 and self.errors > 0:
            self.errors -= 1
            self.events.append(("error", slot, "RuntimeError: [gloo] Read error: peer gone"))
            return
        now = time.time()
        self.events.append(("result", slot, {
            "segment": order["segment"], "job": order["job"], "rank": order["rank"],
            "steps_before": order["expected_steps"], "steps_after": order["until_steps"],
            "resident": False, "restored_steps": None, "corrupt": [],
            "first_step_wall": now, "last_step_wall": now, "end_wall": now, "switch_s": 0.0,
            "checkpoints": []}))

    def poll(self, timeout: float) -> list[Any]:
        events, self.events = self.events, []
        return events

    def restart(self, slot: Any) -> None:
        self.restarts.append(slot)

    def pid(self, slot: Any) -> int:
        return 0

    def gang_store(self, world: int) -> tuple[Any, str, int]:
        return None, "127.0.0.1", 0

    def close(self) -> None:
        self._started = False


@pytest.mark.parametrize("errors", [0, 1, MAX_GANG_FAULTS, MAX_GANG_FAULTS + 1])
def test_gang_member_error_is_a_fault_a_bounded_number_of_times(tmp_path: Path,
                                                                errors: int) -> None:
    solution, instance = _write(tmp_path, [[("a", [0, 1])], [("b", [0])]],
                                jobs={"a": A, "b": B}, steps={"a": 6, "b": 5},
                                throughput={"a": 6.0, "b": 5.0})
    backend = _FakeBackend(errors)

    def replay() -> Any:
        return run_replay(solution, instance, backend=backend, workdir=tmp_path / "work",
                          segment_steps=True, checkpoint_every_s=0)

    if errors > MAX_GANG_FAULTS:  # a worker that fails every time is a bug: it stops
        with pytest.raises(WorkerFailed, match="cpu:1: RuntimeError"):
            replay()
        return
    report = replay()
    assert all(job.finished for job in report.jobs)
    faults = {job.job: job.faults for job in report.jobs}
    assert [f["kind"] for f in faults["a"]] == ["gang_error"] * errors
    assert faults["b"] == []
    assert backend.restarts == [("cpu", 0), ("cpu", 1)] * errors


def test_single_worker_error_stops_the_replay(tmp_path: Path) -> None:
    solution, instance = _write(tmp_path, [[("a", [0])]], jobs={"a": A},
                                steps={"a": 5}, throughput={"a": 5.0})

    class Failing(_FakeBackend):
        def submit(self, slot: Any, order: dict[str, Any]) -> None:
            self.events.append(("error", slot, "ValueError: a bug"))

    with pytest.raises(WorkerFailed, match="cpu:0: ValueError: a bug"):
        run_replay(solution, instance, backend=Failing(0), workdir=tmp_path / "work",
                   segment_steps=True, checkpoint_every_s=0)
