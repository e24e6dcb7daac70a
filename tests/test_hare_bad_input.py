"""Bad Hare jobs through the command line (``schedlab solve FILE --formulation hare.greedy``):
exit code 2, one error line naming the file and the field, nothing on stdout, no output file."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from schedlab.cli import main


def hare_batch() -> dict[str, Any]:
    """Two valid Hare jobs on 1 V100 + 2 K80 and an empty T4 pool."""
    return {"name": "hare-batch",
            "cluster": {"accelerators": {"v100": {"count": 1}, "k80": {"count": 2},
                                         "t4": {"count": 0}}},
            "jobs": [{"id": "a", "rounds": 2, "tasks_per_round": 2,
                      "task_seconds": {"v100": 1.0, "k80": 2.0}},
                     {"id": "b", "rounds": 1, "tasks_per_round": 3,
                      "task_seconds": {"k80": 2.0}, "switch_seconds": {"k80": 0.5}}]}


CASES = [
    ("no usable type", {"task_seconds": {"t4": 1.0}}, "jobs[1].task_seconds",
     "no GPU type present"),
    ("zero rounds", {"rounds": 0}, "jobs[1].rounds", "greater than or equal to 1"),
    ("negative weight", {"weight": -1.0}, "jobs[1].weight", "greater than 0"),
    ("negative task time", {"task_seconds": {"k80": -2.0}}, "jobs[1].task_seconds.k80",
     "greater than 0"),
    ("negative arrival", {"arrival": -5.0}, "jobs[1].arrival", "greater than or equal to 0"),
    ("negative switch cost", {"switch_seconds": {"k80": -0.5}}, "jobs[1].switch_seconds",
     "on k80 must be a finite number >= 0"),
    ("switch cost for an unknown type", {"switch_seconds": {"a100": 0.5}},
     "jobs[1].switch_seconds.a100", "unknown accelerator 'a100'"),
]


@pytest.mark.parametrize(("name", "change", "field", "words"), CASES,
                         ids=[c[0] for c in CASES])
def test_bad_hare_job_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                              change: dict[str, Any], field: str, words: str) -> None:
    document = copy.deepcopy(hare_batch())
    document["jobs"][1].update(change)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    out_path = tmp_path / "solution.json"
    code = main(["solve", str(path), "--formulation", "hare.greedy", "--out", str(out_path)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(path) in lines[0] and field in lines[0] and words in lines[0], lines[0]
    assert not out_path.exists()


def test_missing_hare_field_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    document = copy.deepcopy(hare_batch())
    del document["jobs"][1]["tasks_per_round"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    code = main(["solve", str(path), "--formulation", "hare.lp_bound"])
    _, err = capsys.readouterr()
    assert code == 2
    assert "jobs[1].tasks_per_round" in err and len(err.splitlines()) == 1


def test_valid_batch_solves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(hare_batch()))
    assert main(["solve", str(path), "--formulation", "hare.greedy"]) == 0
    capsys.readouterr()
