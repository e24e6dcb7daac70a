"""Bad Shockwave jobs through the command line: exit code 2, one error line naming the file
and the field, no output file written.

The window is three static jobs on 2 V100s (2 rounds of 120 s); each case breaks job 1 in one
way.  The Instance itself rejects fields that disagree (``schedlab validate`` and ``solve``
both refuse the file); a job that lacks the fields the Shockwave window problem needs is
refused by the formulation when ``solve`` builds it.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from schedlab.cli import main
from schedlab.instance import instance_from_dict

REPO = Path(__file__).resolve().parent.parent
FORMULATIONS = ["shockwave.nash_welfare", "shockwave.nash_welfare_convex"]


def shockwave_window() -> dict[str, Any]:
    """A valid window: three static jobs (E epochs of t seconds at batch size 32 or 64)."""
    jobs = []
    for i, (epochs, done, size, seconds) in enumerate([(6, 1, 32, 100.0), (4, 0, 64, 200.0),
                                                        (5, 2, 32, 60.0)]):
        jobs.append({"id": f"j{i}", "epochs": epochs, "epochs_done": done,
                     "batch_schedule": [size] * epochs, "regimes": {str(size): seconds},
                     "throughput": {"v100": 1.0}})
    return {"name": "shockwave-window", "cluster": {"accelerators": {"v100": {"count": 2}}},
            "params": {"round_s": 120.0, "window_rounds": 2}, "jobs": jobs}


def broken(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The window with job 1 changed by ``change``."""
    document = copy.deepcopy(shockwave_window())
    change(document["jobs"][1])
    return document


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(err: str, *fragments: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"


# (test id, job 1's change, field path in the message, words of the reason)
INSTANCE_ERRORS: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("empty-regimes", lambda job: job.update(regimes={}), "jobs[1].regimes", "empty"),
    ("negative-epoch-time", lambda job: job.update(regimes={"64": -200.0}),
     "jobs[1].regimes.64", "greater than 0"),
    ("done-beyond-epochs", lambda job: job.update(epochs_done=5), "jobs[1].epochs_done",
     "epochs_done 5 exceeds epochs 4"),
    ("schedule-size-not-in-regimes",
     lambda job: job.update(batch_schedule=[64, 64, 128, 64]), "jobs[1].batch_schedule[2]",
     "batch size 128 has no entry in regimes"),
    ("schedule-length", lambda job: job.update(batch_schedule=[64, 64, 64]),
     "jobs[1].batch_schedule", "3 entries for 4 epochs"),
    ("regimes-key-not-a-batch-size", lambda job: job.update(regimes={"64": 200.0, "big": 1.0}),
     "jobs[1].regimes.big", "positive integers"),
    ("regimes-key-zero", lambda job: job.update(regimes={"64": 200.0, "0": 1.0}),
     "jobs[1].regimes.0", "positive integers"),
]


def test_the_window_itself_solves(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The unbroken file solves (so each failure below is the change's doing)."""
    path = tmp_path / "window.json"
    path.write_text(json.dumps(shockwave_window()))
    out_path = tmp_path / "sol.json"
    code, _, err = run_main(capsys, "solve", str(path), "--formulation",
                            "shockwave.nash_welfare_convex", "--out", str(out_path))
    assert code == 0, err
    assert out_path.exists()


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize(("change", "field", "reason"),
                         [pytest.param(c, f, r, id=i) for i, c, f, r in INSTANCE_ERRORS])
def test_bad_shockwave_job_exits_2_naming_file_and_field(
        capsys: pytest.CaptureFixture[str], write_instance: Callable[..., Path],
        tmp_path: Path, formulation: str, change: Callable[[dict[str, Any]], None],
        field: str, reason: str) -> None:
    path = write_instance(broken(change), name="bad-window.json")
    out_path = tmp_path / "sol.json"
    code, out, err = run_main(capsys, "solve", str(path), "--formulation", formulation,
                              "--out", str(out_path))
    assert code == 2
    assert_one_error_line(err, str(path), field, reason)
    assert out == ""
    assert not out_path.exists()


@pytest.mark.parametrize(("change", "field", "reason"),
                         [pytest.param(c, f, r, id=i) for i, c, f, r in INSTANCE_ERRORS])
def test_validate_refuses_the_same_files(capsys: pytest.CaptureFixture[str],
                                         write_instance: Callable[..., Path],
                                         change: Callable[[dict[str, Any]], None],
                                         field: str, reason: str) -> None:
    path = write_instance(broken(change), name="bad-window.json")
    code, _, err = run_main(capsys, "validate", str(path))
    assert code == 2
    assert_one_error_line(err, str(path), field, reason)


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("missing", ["regimes", "batch_schedule", "epochs"])
def test_job_without_shockwave_fields_is_refused_by_the_formulation(
        capsys: pytest.CaptureFixture[str], write_instance: Callable[..., Path],
        tmp_path: Path, formulation: str, missing: str) -> None:
    document = broken(lambda job: job.pop(missing))
    if missing == "epochs":  # epochs_done > 0 needs no epochs, but keep the job plain
        document["jobs"][1]["epochs_done"] = 0
    instance_from_dict(document)  # a valid instance: only the formulation needs the field
    path = write_instance(document, name="no-profile.json")
    out_path = tmp_path / "sol.json"
    code, out, err = run_main(capsys, "solve", str(path), "--formulation", formulation,
                              "--out", str(out_path))
    assert code == 2
    assert_one_error_line(err, str(path), f"jobs[1].{missing}", f"no {missing}")
    assert out == ""
    assert not out_path.exists()


def test_real_process_exit_code(tmp_path: Path) -> None:
    """``python -m schedlab``: exit status 2, stderr one line, nothing on stdout."""
    path = tmp_path / "bad-window.json"
    path.write_text(json.dumps(broken(lambda job: job.update(epochs_done=9))))
    out_path = tmp_path / "sol.json"
    proc = subprocess.run(
        [sys.executable, "-m", "schedlab", "solve", str(path), "--formulation",
         "shockwave.nash_welfare", "--out", str(out_path)],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert proc.returncode == 2
    assert_one_error_line(proc.stderr, str(path), "jobs[1].epochs_done", "exceeds epochs 4")
    assert proc.stdout == ""
    assert not out_path.exists()
