"""Outputs explain themselves: an empty round says why, Hare schedules show round, task and
GPU ids, merged groups are named, jobs without time alone are explained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schedlab.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _solve(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["solve", *args]) == 0
    return capsys.readouterr().out


def test_an_empty_round_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    path = ROOT / "instances/titan/small-10tasks-16gpus.json"
    first = min(job["arrival"] for job in json.loads(path.read_text())["jobs"])
    assert first > 0  # the file's tasks arrive after params.now_s = 0
    out = _solve(capsys, str(path), "-f", "titan.round_ilp")
    assert "the solution places nothing" in out
    assert (f"no task has arrived by params.now_s = 0 s (the first arrives at {first:g} s"
            in out)


def test_hare_schedule_rows_name_round_task_and_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    out = _solve(capsys, str(ROOT / "instances/hare/small-6jobs-4gpus.json"), "-f",
                 "hare.greedy")
    header = next(line for line in out.splitlines() if "start s" in line)
    for column in ("round", "task", "gpu ids"):
        assert column in header
    rows = [line for line in out.splitlines() if line.startswith("│") and "FastGCN" in line]
    assert len(rows) == len(set(rows))  # no two identical rows


def test_merged_groups_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    out = _solve(capsys, str(ROOT / "instances/titan/case-1.json"), "-f",
                 "titan.merge_offline")
    assert "groups: 1 merged group(s): A + B" in out


def test_jobs_running_only_colocated_are_explained(capsys: pytest.CaptureFixture[str]) -> None:
    out = _solve(capsys, str(ROOT / "instances/gavel/colocation-24jobs.json"), "-f",
                 "gavel.max_min_fairness_packed")
    notes = [line for line in out.splitlines() if line.startswith("note: job ")]
    assert notes and all("runs only co-located" in line or "gets no time" in line
                         for line in notes)
