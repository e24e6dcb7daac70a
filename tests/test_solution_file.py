"""The solution file's writer: the same JSON document as ``json.dumps``, one entry per line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from schedlab.solution import (
    InstanceRef,
    PairShare,
    Placement,
    ScheduleEntry,
    Solution,
    Status,
    dumps_by_line,
    load_solution,
)


def _random_payload(rng: np.random.Generator) -> dict[str, object]:
    def leaf() -> object:
        kind = rng.integers(5)
        if kind == 0:
            return float(rng.normal()) * 10.0 ** float(rng.integers(-8, 8))
        if kind == 1:
            return int(rng.integers(-1000, 1000))
        if kind == 2:
            return "job-" + "".join(rng.choice(list('ab"\\é\n '), size=4))
        if kind == 3:
            return None
        return bool(rng.integers(2))

    payload: dict[str, object] = {}
    for i in range(int(rng.integers(1, 8))):
        shape = rng.integers(4)
        if shape == 0:
            payload[f"k{i}"] = leaf()
        elif shape == 1:
            payload[f"k{i}"] = {f"j{n}": {"v100": leaf(), "k80": [leaf(), leaf()]}
                                for n in range(int(rng.integers(0, 4)))}
        elif shape == 2:
            payload[f"k{i}"] = [{"round": n, "jobs": [leaf()]}
                                for n in range(int(rng.integers(0, 4)))]
        else:
            payload[f"k{i}"] = []
    return payload


def test_same_document_as_json_dumps() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        payload = _random_payload(rng)
        text = dumps_by_line(payload)
        assert json.loads(text) == json.loads(json.dumps(payload))
        assert text.endswith("}\n")


def test_one_entry_per_line_and_no_nan() -> None:
    text = dumps_by_line({"status": "optimal", "rounds": [{"a": 1}, {"b": 2}],
                          "allocation": {"j0": {"v100": 0.5}}})
    lines = text.splitlines()
    assert '    {"a": 1},' in lines and '    {"b": 2}' in lines
    assert '    "j0": {"v100": 0.5}' in lines
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            dumps_by_line({"objective": bad})


def test_saved_solution_reads_back(tmp_path: Path) -> None:
    solution = Solution(formulation="gavel.max_min_fairness",
                        instance=InstanceRef(name="two-jobs", hash="0" * 64),
                        status=Status.OPTIMAL, objective=0.25,
                        allocation={"a": {"v100": 0.5, "k80": 0.25}, "b": {"p100": 1.0}})
    path = tmp_path / "s.json"
    solution.save(path)
    assert load_solution(path) == solution


def test_fast_file_is_the_same_document_as_the_dict_path(tmp_path: Path) -> None:
    """save() (pydantic's encoder, piece by piece) writes the document of dumps_by_line over
    to_dict(), line for line in the same layout, for a solution with every kind of field."""
    rng = np.random.default_rng(3)
    solution = Solution(
        formulation="gavel.max_min_fairness", instance=InstanceRef(name="x", hash="0" * 64),
        status=Status.FEASIBLE, objective=float(rng.random()), bound=1e-5, gap=None,
        allocation={f"j{i}": {"v100": float(rng.random()), "k80": 1e-7} for i in range(5)},
        colocated_allocation=[PairShare(jobs=("j0", "j1"), accelerator="v100", fraction=0.5)],
        schedule=[ScheduleEntry(job="j0", start=0.0, end=12.5, gpu_ids=[0, 1], gpus=2)],
        rounds=[[Placement(job="j0", accelerator="v100", gpus=1, gpu_ids=[3])], []],
        groups=[["j0", "j1"]], metrics={"a": {"j0": 1.5}, "b": [1, 2.5], "c": "NaN text"},
        diagnostics=["Infinity is a word here"])
    path = tmp_path / "s.json"
    solution.save(path)
    text = path.read_text()
    reference = dumps_by_line(solution.to_dict())
    assert json.loads(text) == json.loads(reference)
    assert len(text.splitlines()) == len(reference.splitlines())
    assert load_solution(path) == solution
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            solution.model_copy(update={"objective": bad}).json_by_line()
