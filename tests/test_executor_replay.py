"""Replays on real zoo jobs (CPU): preempt -> resume bit-identical, faults, resume after an
interrupt, the Ray backend, the command line.

Reference runs are computed in the test process with :class:`TrainingJob` (one torch thread,
as the workers), never taken from the executor's output.  Every replay here but the fidelity
test (tests/test_executor_fidelity.py) runs in the steps-budget mode, where each segment runs
its predicted whole steps, so progress is deterministic and final parameters can be compared
bit for bit.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from schedlab.cli import main
from schedlab.executor.backends import LocalBackend
from schedlab.executor.plan import Segment
from schedlab.executor.replay import JOURNAL, Hooks, read_journal
from schedlab.executor.report import replay_report_json_schema
from schedlab.executor.run import run_replay
from schedlab.profiler.checkpoint import decode, list_checkpoints
from schedlab.profiler.zoo import TrainingJob, parse_job_name

A, B = "lstm/tiny@4", "recommender/tiny@8"


def _write(tmp: Path, rounds: list[list[tuple[str, list[int]]]], *, total_a: int = 25,
           total_b: int = 30, round_s: float = 1.0, throughput: float = 10.0,
           job_a: str = A) -> tuple[Path, Path]:
    instance = {"schema": "schedlab/instance@1",
                "cluster": {"accelerators": {"cpu": {"count": 2}}},
                "jobs": [{"id": "a", "job_type": job_a, "total_steps": total_a,
                          "throughput": {"cpu": throughput}},
                         {"id": "b", "job_type": B, "total_steps": total_b,
                          "throughput": {"cpu": throughput}}],
                "params": {"round_s": round_s}}
    solution = {"schema": "schedlab/solution@1", "instance": {"name": "t", "hash": ""},
                "formulation": "manual", "status": "feasible",
                "rounds": [[{"job": j, "accelerator": "cpu", "gpus": len(ids), "gpu_ids": ids}
                            for j, ids in r] for r in rounds]}
    (tmp / "instance.json").write_text(json.dumps(instance))
    (tmp / "solution.json").write_text(json.dumps(solution))
    return tmp / "solution.json", tmp / "instance.json"


# a: 10 steps on cpu:0, preempted a round, 10 on cpu:1, 5 more there (stays resident);
# b: 10 on cpu:1, moves to cpu:0 for 10, stays for its last 10.
PLAN = [[("a", [0]), ("b", [1])], [("b", [0])], [("a", [1]), ("b", [0])], [("a", [1])]]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _reference(name: str, seed: int, steps: int) -> dict[str, torch.Tensor]:
    """Parameters of an uninterrupted run of ``steps`` steps (the executor seeds job i with
    1000 i)."""
    with torch.random.fork_rng(devices=[]):
        job = TrainingJob(parse_job_name(name), seed=seed)
        for _ in range(steps):
            job.step()
    return job.model.state_dict()


def _final(workdir: Path, job: str) -> dict[str, Any]:
    _, path = list_checkpoints(workdir / "checkpoints" / job)[-1]
    return decode(path.read_bytes())


def _same(left: dict[str, torch.Tensor], right: dict[str, torch.Tensor]) -> bool:
    return left.keys() == right.keys() and all(torch.equal(left[k], right[k]) for k in left)


@pytest.fixture(scope="module")
def pool() -> Iterator[LocalBackend]:
    """Two warm local workers shared by the replays of this module (starting workers is
    most of a small replay's time)."""
    backend = LocalBackend(1)
    backend.start([("cpu", 0), ("cpu", 1)], [A, B, "lstm/tiny@32", "recommender/tiny@4"])
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory, pool: LocalBackend
              ) -> tuple[Path, Any]:
    tmp = tmp_path_factory.mktemp("local")
    solution, instance = _write(tmp, PLAN)
    report = run_replay(solution, instance, backend=pool, workdir=tmp / "work",
                        segment_steps=True, checkpoint_every_s=0, out=tmp / "report.json")
    return tmp, report


def test_preempt_and_move_resume_bit_identical(local_run: tuple[Path, Any]) -> None:
    tmp, report = local_run
    by_job = {j.job: j for j in report.jobs}
    assert by_job["a"].realized_steps == 25 and by_job["b"].realized_steps == 30
    assert by_job["a"].finished and by_job["b"].finished
    # a restored twice from a checkpoint (after its preemption, and... no: once, on cpu:1);
    # its third segment kept it resident.  b restored once (the move to cpu:0).
    segments = {(r["job"], r["round"]): r for r in report.segments}
    assert segments[("a", 2)]["restored_steps"] == 10
    assert segments[("a", 3)]["restored"] is False
    assert segments[("b", 1)]["restored_steps"] == 10
    assert segments[("b", 2)]["restored"] is False
    assert _same(_final(tmp / "work", "a")["model"], _reference(A, 0, 25))
    assert _same(_final(tmp / "work", "b")["model"], _reference(B, 1000, 30))
    saved = json.loads((tmp / "report.json").read_text())
    assert saved["schema"] == "schedlab/replay@1"
    assert [j["realized_steps"] for j in saved["jobs"]] == [25, 30]


def test_report_schema_describes_the_file(local_run: tuple[Path, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    tmp, _ = local_run
    jsonschema.validate(json.loads((tmp / "report.json").read_text()),
                        replay_report_json_schema())


def test_sigkill_mid_segment_resumes_from_last_checkpoint(tmp_path: Path,
                                                         pool: LocalBackend) -> None:
    every = 0.2
    # one long segment for a: 400 steps of ~5 ms, killed 0.5 s after it starts
    solution, instance = _write(tmp_path, [[("a", [0]), ("b", [1])]], total_a=400,
                                total_b=20, round_s=60.0, throughput=10.0,
                                job_a="lstm/tiny@32")
    killed: list[int] = []

    def started(segment: Segment, pids: list[int]) -> None:
        if segment.job == "a" and not killed:
            killed.append(pids[0])
            threading.Timer(0.5, os.kill, (pids[0], signal.SIGKILL)).start()

    report = run_replay(solution, instance, backend=pool, workdir=tmp_path / "work",
                        segment_steps=True, checkpoint_every_s=every,
                        hooks=Hooks(segment_started=started))
    job = {j.job: j for j in report.jobs}["a"]
    assert job.finished and job.realized_steps == 400
    (fault,) = [f for f in job.faults if f["kind"] == "worker_died"]
    assert fault["steps_reached"] is not None
    # (equal when the kill lands right after a checkpoint, before the next progress report)
    assert fault["steps_reached"] >= fault["resumed_from_steps"] >= 0
    # the work lost is what ran after the last checkpoint: at most one interval (plus the
    # step that crossed it and the 20 ms progress-report granularity, under load)
    assert fault["lost_s"] <= every + 0.25
    assert report.summary.faults >= 1
    assert _same(_final(tmp_path / "work", "a")["model"], _reference("lstm/tiny@32", 0, 400))


def test_corrupt_checkpoint_restarts_from_the_previous_one(tmp_path: Path,
                                                          pool: LocalBackend) -> None:
    # a: 10 steps on cpu:0, 10 on cpu:1 (checkpoints at 10 and 20), then back to cpu:0,
    # whose newest checkpoint (20) the test corrupts just before the segment starts.
    solution, instance = _write(tmp_path, [[("a", [0])], [("a", [1])], [("a", [0])]],
                                total_a=30, total_b=5)

    def starting(segment: Segment) -> None:
        if segment.round == 2:
            steps, path = list_checkpoints(tmp_path / "work" / "checkpoints" / "a")[-1]
            assert steps == 20
            data = bytearray(path.read_bytes())
            data[-10] ^= 0xFF
            path.write_bytes(bytes(data))

    report = run_replay(solution, instance, backend=pool, workdir=tmp_path / "work",
                        segment_steps=True, checkpoint_every_s=0,
                        hooks=Hooks(segment_starting=starting))
    job = {j.job: j for j in report.jobs}["a"]
    (fault,) = [f for f in job.faults if f["kind"] == "corrupt_checkpoint"]
    assert fault["resumed_from_steps"] == 10
    assert fault["files"][0].endswith("step-000000000020.ckpt")
    # it ran 20 steps in its last segment (10 -> 30) and ends where an uninterrupted run does
    assert job.realized_steps == 30
    assert _same(_final(tmp_path / "work", "a")["model"], _reference(A, 0, 30))


def test_interrupt_leaves_whole_files_and_resume_finishes(tmp_path: Path,
                                                         pool: LocalBackend) -> None:
    solution, instance = _write(tmp_path, PLAN)
    work = tmp_path / "work"

    def finished(record: dict[str, Any]) -> None:
        if record["round"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_replay(solution, instance, workdir=work, segment_steps=True, checkpoint_every_s=0,
                   hooks=Hooks(segment_finished=finished), out=tmp_path / "report.json")
    assert not (tmp_path / "report.json").exists()
    lines = (work / JOURNAL).read_text().splitlines()
    assert all(json.loads(line) for line in lines)  # whole lines only
    header, records = read_journal(work / JOURNAL)
    assert header is not None and {r["round"] for r in records} <= {0, 1}
    assert not list(work.glob("checkpoints/*/.step-*"))  # no partial checkpoint
    with pytest.raises(Exception, match="--resume"):
        run_replay(solution, instance, workdir=work, segment_steps=True)
    # the interrupted run owned (and stopped) its workers; the resume runs on the pool
    report = run_replay(solution, instance, backend=pool, workdir=work, segment_steps=True,
                        checkpoint_every_s=0, resume=True)
    assert sorted(r["segment"] for r in report.segments) == list(range(6))
    assert {j.job: j.realized_steps for j in report.jobs} == {"a": 25, "b": 30}
    assert _same(_final(work, "a")["model"], _reference(A, 0, 25))
    assert _same(_final(work, "b")["model"], _reference(B, 1000, 30))


def test_hung_worker_is_a_fault_and_the_job_resumes(tmp_path: Path,
                                                   pool: LocalBackend) -> None:
    # wall-time mode, 1 s rounds: a runs in round 0 on cpu:0 (checkpoints every 0.2 s) and
    # again in round 6 on cpu:1.  Its worker is stopped (SIGSTOP: alive, silent) 0.5 s into
    # round 0; the watchdog must call the segment hung at its end + 2 s grace, replace the
    # worker and let a resume from its newest checkpoint in round 6.
    every = 0.2
    rounds: list[list[tuple[str, list[int]]]] = [[("a", [0]), ("b", [1])]]
    rounds += [[] for _ in range(5)] + [[("a", [1])]]
    solution, instance = _write(tmp_path, rounds, total_a=100000, total_b=100000,
                                round_s=1.0, throughput=10.0, job_a="lstm/tiny@32")
    stopped: list[int] = []

    def started(segment: Segment, pids: list[int]) -> None:
        if segment.job == "a" and not stopped:
            stopped.append(pids[0])
            threading.Timer(0.5, os.kill, (pids[0], signal.SIGSTOP)).start()

    report = run_replay(solution, instance, backend=pool, workdir=tmp_path / "work",
                        checkpoint_every_s=every, hooks=Hooks(segment_started=started))
    assert pool.pid(("cpu", 0)) != stopped[0]  # replaced
    with pytest.raises(ProcessLookupError):  # and the stopped one is gone
        os.kill(stopped[0], 0)
    job = {j.job: j for j in report.jobs}["a"]
    (fault,) = job.faults
    assert fault["kind"] == "hang" and fault["segment"] == 0
    first, second = sorted((r for r in report.segments if r["job"] == "a"),
                           key=lambda r: r["round"])
    assert first["steps_after"] == fault["resumed_from_steps"]
    assert fault["steps_reached"] is None or \
        fault["steps_reached"] >= fault["resumed_from_steps"]
    assert second["restored_steps"] == fault["resumed_from_steps"]
    assert _same(_final(tmp_path / "work", "a")["model"],
                 _reference("lstm/tiny@32", 0, second["steps_after"]))


def test_gang_runs_ddp_over_both_slots(tmp_path: Path, pool: LocalBackend) -> None:
    # a on both CPU slots (gloo DDP) for 6 steps: rank r draws batches with seed 0 + r, the
    # gradients are averaged; the reference averages the two ranks' gradients by hand.
    solution, instance = _write(tmp_path, [[("a", [0, 1])]], total_a=6, total_b=1,
                                throughput=6.0, job_a="recommender/tiny@4")
    report = run_replay(solution, instance, backend=pool, workdir=tmp_path / "work",
                        segment_steps=True, checkpoint_every_s=0)
    assert {j.job: j.realized_steps for j in report.jobs}["a"] == 6
    assert report.summary.faults == 0  # a hung gang would be a flagged (watchdog) fault
    spec = parse_job_name("recommender/tiny@4")
    with torch.random.fork_rng(devices=[]):
        lead = TrainingJob(spec, seed=0)
        for step in range(6):
            grads = []
            for rank in range(2):  # each rank's gradient, from a throw-away copy
                probe = TrainingJob(spec, seed=rank, model=copy.deepcopy(lead.model))
                probe.steps_done = step
                probe.step()
                grads.append({n: p.grad for n, p in probe.model.named_parameters()})
            lead.optimizer.zero_grad()
            for n, p in lead.model.named_parameters():
                p.grad = (grads[0][n] + grads[1][n]) / 2
            lead.optimizer.step()
    final = _final(tmp_path / "work", "a")["model"]
    for name, value in lead.model.state_dict().items():
        torch.testing.assert_close(final[name], value, rtol=1e-5, atol=1e-7)


def test_cli_replay_and_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    solution, instance = _write(tmp_path, [[("a", [0]), ("b", [1])]], total_a=5, total_b=5)
    out = tmp_path / "report.json"
    code = main(["replay", str(solution), "--instance", str(instance), "--segment-steps",
                 "--workdir", str(tmp_path / "w"), "--out", str(out)])
    assert code == 0
    assert "2/2 jobs finished" in capsys.readouterr().out
    assert json.loads(out.read_text())["mode"] == "steps"

    bad = json.loads(instance.read_text())
    bad["jobs"][1]["job_type"] = "alexnet@3"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    code = main(["replay", str(solution), "--instance", str(tmp_path / "bad.json"),
                 "--workdir", str(tmp_path / "w2"), "--out", str(tmp_path / "r2.json")])
    err = capsys.readouterr().err
    assert code == 2 and "jobs[1].job_type" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "w2").exists() and not (tmp_path / "r2.json").exists()

    assert main(["replay", str(solution), "--instance", str(instance), "--resume",
                 "--workdir", str(tmp_path / "none")]) == 2
    assert main(["replay", str(solution), "--instance", str(instance), "--time-scale", "0"]) == 2
    assert main(["replay", str(tmp_path / "missing.json"), "--instance", str(instance)]) == 2
    assert main(["replay", str(solution), "--instance", str(instance), "--device-map",
                 "cpu=cuda:0", "--workdir", str(tmp_path / "w3")]) == (
        0 if torch.cuda.is_available() else 2)
    capsys.readouterr()
    assert main(["schema", "replay"]) == 0
    assert "schedlab/replay@1" in capsys.readouterr().out


# ------------------------------------------------------------------------------ Ray


def test_ray_backend_same_progress_as_local(local_run: tuple[Path, Any],
                                            tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    local_tmp, local_report = local_run
    solution, instance = _write(tmp_path, PLAN)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        report = run_replay(solution, instance, backend="ray", workdir=tmp_path / "work",
                            segment_steps=True, checkpoint_every_s=0)
    finally:
        ray.shutdown()
    assert {j.job: j.realized_steps for j in report.jobs} == \
        {j.job: j.realized_steps for j in local_report.jobs} == {"a": 25, "b": 30}
    assert [(r["job"], r["steps_after"]) for r in report.segments] == \
        [(r["job"], r["steps_after"]) for r in local_report.segments]
    for job in ("a", "b"):
        assert _same(_final(tmp_path / "work", job)["model"],
                     _final(local_tmp / "work", job)["model"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_slot_replay(tmp_path: Path) -> None:
    solution, instance = _write(tmp_path, [[("a", [0]), ("b", [1])]], total_a=5, total_b=5)
    report = run_replay(solution, instance, workdir=tmp_path / "work", segment_steps=True,
                        devices={("cpu", 0): "cuda:0"})
    assert {j.job: j.realized_steps for j in report.jobs} == {"a": 5, "b": 5}
