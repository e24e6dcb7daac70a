"""Titan's instance fields and bad input: pair entries (``merges``), GPU-keyed profiles,
``max_gpus``, ``params.similarity_threshold``; a task without a base model is refused by
the Titan formulations.  Through the CLI: exit 2 and one error line naming file and field."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.formulations.titan.offline import MergeOffline
from schedlab.formulations.titan.round_ilp import RoundIlp
from schedlab.instance import instance_from_dict


def document() -> dict[str, Any]:
    """Two tasks (labels need no hierarchy here) and one measured pair entry."""
    return {
        "name": "pair",
        "cluster": {"accelerators": {"v100": {"count": 8}}},
        "jobs": [
            {"id": "A", "base_model": "vit", "classes": ["cat"], "duration_s": {"8": 20}},
            {"id": "B", "base_model": "vit", "classes": ["dog"], "duration_s": {"8": 20},
             "max_gpus": 4},
        ],
        "merges": [{"tasks": ["A", "B"], "duration_s": {"8": 25}}],
        "params": {"round_s": 120, "similarity_threshold": 0.4},
    }


def changed(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    d = copy.deepcopy(document())
    change(d)
    return d


def test_valid_document_round_trips() -> None:
    instance = instance_from_dict(document())
    assert instance.merges is not None and instance.merges[0].tasks == ["A", "B"]
    assert instance.jobs[1].max_gpus == 4
    assert instance.params.similarity_threshold == 0.4
    again = instance_from_dict(instance.to_dict())
    assert again == instance


@pytest.mark.parametrize(("change", "field", "reason"), [
    (lambda d: d["merges"][0]["tasks"].__setitem__(1, "Z"), "merges[0].tasks[1]",
     "unknown task 'Z'"),
    (lambda d: d["merges"][0]["duration_s"].__setitem__("8", -25), "merges[0].duration_s.8",
     "greater than 0"),
    (lambda d: d["merges"][0]["duration_s"].__setitem__("8", 0), "merges[0].duration_s.8",
     "greater than 0"),
    (lambda d: d["merges"][0].__setitem__("duration_s", {"four": 3}),
     "merges[0].duration_s.four", "keys must be GPU counts"),
    (lambda d: d["merges"][0].__setitem__("duration_s", {}), "merges[0].duration_s",
     "is empty"),
    (lambda d: d["merges"][0].__setitem__("tasks", ["A", "A"]), "merges[0].tasks",
     "names task 'A' twice"),
    (lambda d: d["merges"].append({"tasks": ["B", "A"], "joint_epoch_factor": 0.7}),
     "merges[1].tasks", "also in merges[0]"),
    (lambda d: d["merges"][0].pop("duration_s"), "merges[0]", "give duration_s"),
    (lambda d: d["merges"][0].__setitem__("joint_epoch_factor", 0.5), "merges[0]",
     "not both"),
    (lambda d: d["jobs"][0].__setitem__("duration_s", {"0": 3}), "jobs[0].duration_s.0",
     "keys must be GPU counts"),
    (lambda d: d["jobs"][1].__setitem__("max_gpus", 0), "jobs[1].max_gpus",
     "greater than or equal to 1"),
    (lambda d: d["params"].__setitem__("similarity_threshold", 1.5),
     "params.similarity_threshold", "less than or equal to 1"),
])
def test_bad_fields_name_their_path(change: Callable[[dict[str, Any]], None], field: str,
                                    reason: str) -> None:
    with pytest.raises(InputError) as caught:
        instance_from_dict(changed(change), source="bad.json")
    assert caught.value.field == field
    assert reason in caught.value.reason


@pytest.mark.parametrize("formulation", [MergeOffline(), RoundIlp()])
@pytest.mark.parametrize(("key", "field"), [("base_model", "jobs[1].base_model"),
                                            ("duration_s", "jobs[1].duration_s")])
def test_a_task_without_titan_fields_is_refused(formulation: MergeOffline | RoundIlp,
                                                key: str, field: str) -> None:
    instance = instance_from_dict(changed(lambda d: d["jobs"][1].pop(key)))
    with pytest.raises(InputError) as caught:
        formulation.solve(instance)
    assert caught.value.field == field


def test_a_task_without_classes_is_never_merged() -> None:
    # A and B pass every rule but the labels: without B's classes no similarity exists, the
    # verdict names it, and the offline merger runs both alone
    from schedlab.formulations.titan.merge import explain_pair

    instance = instance_from_dict(changed(lambda d: d["jobs"][1].pop("classes")))
    verdict = explain_pair(instance, "A", "B")
    assert not verdict.may_merge
    assert any("no class labels for task B" in reason for reason in verdict.reasons)
    solution = MergeOffline().solve(instance)
    assert not solution.groups


def test_offline_refuses_arrivals() -> None:
    instance = instance_from_dict(changed(lambda d: d["jobs"][0].__setitem__("arrival", 5)))
    with pytest.raises(InputError) as caught:
        MergeOffline().solve(instance)
    assert caught.value.field == "jobs[0].arrival"


def test_two_accelerator_types_are_refused() -> None:
    instance = instance_from_dict(changed(
        lambda d: d["cluster"]["accelerators"].__setitem__("a100", {"count": 4})))
    with pytest.raises(InputError) as caught:
        RoundIlp().solve(instance)
    assert caught.value.field == "cluster.accelerators"


@pytest.mark.parametrize(("change", "fragments"), [
    (lambda d: d["merges"][0]["tasks"].__setitem__(0, "nobody"),
     ("merges[0].tasks[0]", "unknown task 'nobody'")),
    (lambda d: d["merges"][0]["duration_s"].__setitem__("8", -1),
     ("merges[0].duration_s.8",)),
    (lambda d: d["jobs"][0].pop("base_model"), ("jobs[0].base_model", "no base model")),
])
def test_cli_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            change: Callable[[dict[str, Any]], None],
                            fragments: tuple[str, ...]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(changed(change)))
    out_file = tmp_path / "sol.json"
    code = main(["solve", str(path), "--formulation", "titan.merge_offline", "--out",
                 str(out_file)])
    out, err = capsys.readouterr()
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(path) in lines[0]
    for fragment in fragments:
        assert fragment in lines[0]
    assert out == "" and not out_file.exists()
