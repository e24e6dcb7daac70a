"""The experiment spec and the one runner: overrides, errors naming the field, the shipped
specs, the engine's cache and claims, and the same cells on the local and the Ray backend.

Expected values are derived by hand (the overrides), or by counting what the engine computed
(a toy cell function defined here)."""

from __future__ import annotations

import json
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from schedlab.analysis.experiments.runner import plan_experiment, run_cached
from schedlab.analysis.experiments.spec import (
    apply_overrides,
    check_experiment,
    experiment_schema,
    load_experiment,
    shipped_document,
    shipped_experiment,
    shipped_names,
)
from schedlab.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "experiment-titan48.yaml"


# ---------------------------------------------------------------------------- overrides


def test_set_replaces_creates_and_appends() -> None:
    document = {"a": {"b": [1, 2]}, "policies": [{"name": "srtf"}]}
    out = apply_overrides(document, ["a.b[1]=5", "a.c.d=x", "policies+={name: fifo}",
                                     "a.b+=[7, 8]"])
    assert out == {"a": {"b": [1, 5, 7, 8], "c": {"d": "x"}},
                   "policies": [{"name": "srtf"}, {"name": "fifo"}]}
    assert document == {"a": {"b": [1, 2]}, "policies": [{"name": "srtf"}]}  # not changed


@pytest.mark.parametrize(("text", "reason"), [
    ("seeds", "expected PATH=VALUE"),
    ("a.b[3]=1", "not an existing list item"),
    ("a.x+=1", "not a list"),
    ("a..b=1", "empty step"),
    ("a.b=[1", "cannot read the value"),
])
def test_bad_set_is_one_input_error(text: str, reason: str) -> None:
    with pytest.raises(InputError, match=reason) as info:
        apply_overrides({"a": {"b": [1], "x": 2}}, [text])
    assert "--set" in str(info.value)


# ------------------------------------------------------------------------------- checks


def _titan(**changes: Any) -> dict[str, Any]:
    document = shipped_document("titan")
    document.update(changes)
    return document


@pytest.mark.parametrize(("changes", "field"), [
    ({"seeds": [0, 0]}, "seeds"),
    ({"seeds": [-1]}, "seeds"),
    ({"table": "bogus"}, "table"),
    ({"colour": "red"}, "colour"),
    ({"name": "a/b"}, "name"),
    ({"run": {"workers": 0}}, "run.workers"),
    ({"policies": [{"label": "x"}]}, "policies[0].name"),
])
def test_a_bad_spec_names_the_file_and_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as info:
        check_experiment(_titan(**changes), "my.yaml")
    assert info.value.file == "my.yaml" and info.value.field == field


@pytest.mark.parametrize(("override", "field"), [
    ("workloads[0].params.densities=[]", "workloads[0].params.densities"),
    ("workloads[0].params.density=-1", "workloads[0].params.density"),
    ("workloads[0].params.colour=1", "workloads[0].params.colour"),
    ("workloads[0].generator=titan.bogus", "workloads[0].generator"),
    ("simulator.round_s=60", "simulator.round_s"),
])
def test_a_bad_table_field_is_refused_before_anything_runs(override: str, field: str,
                                                           tmp_path: Path) -> None:
    spec = shipped_experiment("titan", overrides=[override])
    with pytest.raises(InputError) as info:
        plan_experiment(spec)
    assert info.value.field == field
    assert not any(tmp_path.iterdir())


def test_a_bare_policy_name_is_a_row() -> None:
    spec = shipped_experiment("titan", overrides=["policies+=fifo"])
    assert spec.policies[-1].name == "fifo" and spec.policies[-1].label is None
    assert plan_experiment(spec).settings.policies[-1] == ("fifo", "fifo", {})


def test_unknown_variant_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match="quick"):
        shipped_experiment("titan", variants=["fast"])


def test_every_shipped_spec_and_variant_is_valid() -> None:
    names = shipped_names()
    assert set(names) == {"gavel", "shockwave", "titan", "hare", "saturn", "cross", "pollux", "sia"}
    for name in names:
        base = shipped_experiment(name)
        assert base.table == name and base.name == name
        for variant in base.variants:
            assert shipped_experiment(name, variants=[variant]).table == name


def test_schema_describes_the_spec() -> None:
    schema = experiment_schema()
    assert {"schema", "name", "table", "workloads", "policies", "seeds", "report",
            "run", "variants"} <= set(schema["properties"])
    assert set(schema["required"]) == {"name", "table"}


def test_example_file_loads_and_adds_a_policy_on_another_cluster() -> None:
    spec = load_experiment(EXAMPLE)
    plan = plan_experiment(spec)
    assert plan.settings.gpus == 48 and plan.settings.preset == "generated"
    assert "fifo" in [name for _, name, _ in plan.settings.policies]
    assert len(plan.cells) == len(spec.policies) * len(spec.seeds)


# ------------------------------------------------------------------------------- engine


def square(cell: int) -> int:
    """The toy cell: module-level, so it pickles to a worker."""
    return cell * cell


def _engine(folder: Path, cells: list[int], calls: list[int], **options: Any
            ) -> tuple[dict[Hashable, Any], list[tuple[int, str]]]:
    def compute(cell: int) -> int:
        calls.append(cell)
        return square(cell)

    def find(cell: int) -> int | None:
        path = folder / f"{cell}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def store(cell: int, result: int) -> int:
        (folder / f"{cell}.json").write_text(json.dumps(result))
        return result

    seen: list[tuple[int, str]] = []
    results = run_cached(cells, compute=options.pop("compute", compute), key=lambda c: c,
                         describe=str, find=find, store=store,
                         claim_path=lambda c: folder / f"{c}.json.claim",
                         on_cell=lambda c, how: seen.append((c, how)), **options)
    return results, seen


def test_engine_computes_only_missing_cells(tmp_path: Path) -> None:
    calls: list[int] = []
    results, seen = _engine(tmp_path, [1, 2, 3], calls)
    assert results == {1: 1, 2: 4, 3: 9} and sorted(calls) == [1, 2, 3]
    assert all(how == "computed" for _, how in seen)
    (tmp_path / "2.json").unlink()
    calls.clear()
    results, seen = _engine(tmp_path, [1, 2, 3, 4], calls)
    assert results == {1: 1, 2: 4, 3: 9, 4: 16} and sorted(calls) == [2, 4]
    assert sorted(c for c, how in seen if how == "cached") == [1, 3]
    assert not list(tmp_path.glob("*.claim"))


def test_engine_on_a_process_pool_gives_the_same_results(tmp_path: Path) -> None:
    results, seen = _engine(tmp_path, list(range(6)), [], compute=square, workers=2)
    assert results == {c: c * c for c in range(6)}
    assert sorted(c for c, _ in seen) == list(range(6))
    assert {json.loads((tmp_path / f"{c}.json").read_text()) for c in range(6)} == \
        {c * c for c in range(6)}


def test_engine_interrupted_keeps_finished_cells_and_releases_claims(tmp_path: Path) -> None:
    calls: list[int] = []

    def stop_at_three(cell: int) -> int:
        calls.append(cell)
        if cell == 3:
            raise KeyboardInterrupt
        return square(cell)

    with pytest.raises(KeyboardInterrupt):
        _engine(tmp_path, [1, 2, 3, 4], calls, compute=stop_at_three)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.json", "2.json"]
    calls.clear()
    results, _ = _engine(tmp_path, [1, 2, 3, 4], calls)
    assert sorted(calls) == [3, 4] and results == {1: 1, 2: 4, 3: 9, 4: 16}
