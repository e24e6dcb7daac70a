"""The model zoo and checkpoints: every model trains, and preempt -> resume is bit-identical."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from schedlab.errors import InputError  # noqa: E402
from schedlab.profiler.checkpoint import (  # noqa: E402
    CorruptCheckpointError,
    decode,
    list_checkpoints,
    load_latest,
    save_checkpoint,
)
from schedlab.profiler.zoo import MODELS, JobSpec, TrainingJob, parse_job_name  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _same_parameters(a: TrainingJob, b: TrainingJob) -> bool:
    left, right = a.model.state_dict(), b.model.state_dict()
    return left.keys() == right.keys() and all(torch.equal(left[k], right[k]) for k in left)


@pytest.mark.parametrize("model", MODELS)
def test_preempt_resume_is_bit_identical(model: str, tmp_path: Path) -> None:
    """6 uninterrupted steps == 3 steps, checkpoint, 2 lost steps, kill, resume, 3 steps."""
    spec = JobSpec(model, "tiny", 4)
    reference = TrainingJob(spec, seed=7)
    losses = [reference.step() for _ in range(6)]
    assert all(loss == loss and loss > 0 for loss in losses)  # finite, positive losses

    first = TrainingJob(spec, seed=7)
    for _ in range(3):
        first.step()
    save_checkpoint(tmp_path, first.state())
    for _ in range(2):  # work after the checkpoint is lost with the process
        first.step()
    del first
    resumed = TrainingJob(spec, seed=123)  # different initial weights: all must come from disk
    restored = load_latest(tmp_path)
    assert restored.state is not None and restored.corrupt == []
    resumed.load_state(restored.state)
    assert resumed.steps_done == 3
    for _ in range(3):
        resumed.step()
    assert _same_parameters(reference, resumed)
    # and a job that did not restore differs (the test can fail)
    assert not _same_parameters(reference, TrainingJob(spec, seed=123))


def test_corrupt_checkpoint_falls_back_to_previous(tmp_path: Path) -> None:
    job = TrainingJob(JobSpec("recommender", "tiny", 4), seed=1)
    job.step()
    save_checkpoint(tmp_path, job.state())
    job.step()
    newest = save_checkpoint(tmp_path, job.state())
    data = bytearray(newest.read_bytes())
    data[-10] ^= 0xFF  # one flipped byte in the payload
    newest.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="checksum"):
        decode(bytes(data))
    restored = load_latest(tmp_path)
    assert restored.corrupt == [newest]
    assert restored.state is not None and restored.state["steps_done"] == 1


def test_keep_only_the_newest(tmp_path: Path) -> None:
    job = TrainingJob(JobSpec("lstm", "tiny", 2), seed=0)
    for _ in range(4):
        job.step()
        save_checkpoint(tmp_path, job.state(), keep=2)
    assert [steps for steps, _ in list_checkpoints(tmp_path)] == [3, 4]
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temporary left


def test_job_names() -> None:
    assert parse_job_name("resnet18/small@64") == JobSpec("resnet18", "small", 64)
    assert parse_job_name("gpt@8") == JobSpec("gpt", "tiny", 8)
    assert parse_job_name("lstm/base@20").name == "lstm/base@20"
    for bad in ("resnet18", "vgg/tiny@8", "resnet18/huge@8", "resnet18@0"):
        with pytest.raises(InputError):
            parse_job_name(bad)
