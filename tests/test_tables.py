"""``schedlab tables saturn``: the table kind (spec, cells, cache, report) and the command
line."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from schedlab.analysis.experiments.runner import compute_table, plan_experiment, run_experiment
from schedlab.analysis.experiments.spec import shipped_experiment
from schedlab.analysis.tables import output
from schedlab.analysis.tables import saturn as st
from schedlab.analysis.tables.saturn import (
    NOISY_METHODS,
    PLAN_METHODS,
    SaturnRow,
    SaturnTable,
    TableSettings,
    Workload,
    render,
)
from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.instance import load_instance
from schedlab.workloads.saturn import example_instances, model_selection_instance

THREE_JOBS = Path(__file__).resolve().parents[1] / "instances" / "saturn" / "three-jobs.json"


def _three_jobs(**changes: object) -> TableSettings:
    """The three-jobs file, MILPs at 5 s, re-solves at 0.5 s, one seed (``changes`` apply)."""
    base = TableSettings(time_limit_s=5.0, seeds=(0,), resolve_time_limit_s=0.5,
                         workloads=(Workload(source="file", file=str(THREE_JOBS)),))
    return replace(base, **changes)  # type: ignore[arg-type]


def test_saturn_table_rows_for_every_method(tmp_path: Path) -> None:
    settings = _three_jobs(seeds=(0, 1))
    seen: list[str] = []
    table = compute_table(st.KIND, settings, tmp_path, on_cell=seen.append)
    rows = table.rows
    assert seen == ["three-jobs: 5 plans, 2 noisy seeds"]  # one cell: the instance
    methods = [row.method for row in rows]
    assert methods == [label for label, _ in PLAN_METHODS] + list(NOISY_METHODS)
    for row in rows:
        assert row.makespan_s >= row.lower_bound_s - 1e-6, row
        assert 0 <= row.gap < 1
        assert "violation" not in row.note
    assert st.KIND.exit_code(table) == 0
    by_method = {(row.method, row.noise_sigma): row for row in rows}
    assert by_method["current practice", 0.0].reduction_vs_current == 0.0
    assert by_method["current practice", 0.2].reduction_vs_current == 0.0
    # hand-checked optimum of the three-job case: 180 s vs 230 s current practice
    ti = by_method["time-indexed MILP", 0.0]
    assert ti.makespan_s == pytest.approx(180.0) and ti.status == "optimal"
    assert ti.reduction_vs_current == pytest.approx(1 - 180 / 230)
    # Saturn's claim in direction (joint optimization beats current practice) holds; its size
    # (39-49% shorter makespans) is not reproduced, here (22%) or on the full table (2-9%,
    # docs/reproduction.md, Saturn)
    assert 0.0 < ti.reduction_vs_current < 0.39
    assert by_method["introspective", 0.2].seeds == 2
    # under noise (factors != 1) nothing proves the realized schedule optimal
    assert by_method["introspective", 0.2].status != "optimal"
    assert render(table).row_count == len(rows)
    # noisy rows: mean ± sample std over the two seeds; plans have no spread
    for row in rows:
        assert (row.makespan_std_s > 0) == (row.noise_sigma > 0), row
    intro = by_method["introspective", 0.2]
    markdown = output.render_markdown(st.document(table))
    assert f"| {intro.makespan_s:,.1f} ± {intro.makespan_std_s:,.1f} |" in markdown
    # the static row executes the time-indexed plan: its status and solve time
    static = by_method["time-indexed, static", 0.2]
    assert (static.status, static.solve_s) == (ti.status, ti.solve_s)


def test_quick_spec_expands_to_the_quick_instances() -> None:
    plan = plan_experiment(shipped_experiment("saturn", variants=["quick"]))
    assert [cell.instance for cell in plan.cells] == [example_instances()["three-jobs.json"]]
    assert plan.cells[0].instance == load_instance(THREE_JOBS)
    cfg = plan.settings
    assert (cfg.seeds, cfg.time_limit_s, cfg.resolve_time_limit_s) == ((0,), 5.0, 0.5)
    assert (cfg.sigma, cfg.restart_cost_s, cfg.scaling) == (0.2, 60.0, "published")
    assert [(label, name) for label, name, _ in cfg.methods] == list(PLAN_METHODS)
    name = plan.cells[0].file_name
    assert name.startswith("three-jobs__") and len(name) == len("three-jobs__") + 12 + 5


def test_default_spec_expands_to_the_published_instances() -> None:
    plan = plan_experiment(shipped_experiment("saturn"))
    published = [model_selection_instance(nodes=n, gpus_per_node=8,
                                          name=f"model-selection-{n}x8", scaling="published")
                 for n in (1, 2)]
    assert [cell.instance for cell in plan.cells] == published
    assert (plan.settings.seeds, plan.settings.time_limit_s) == ((0, 1, 2), 10.0)
    # --scaling analytic: exactly the files of instances/saturn/
    analytic = plan_experiment(shipped_experiment(
        "saturn", overrides=["workloads[0].params.scaling=analytic"]))
    files = example_instances()
    assert [cell.instance for cell in analytic.cells] == [
        files["model-selection-1x8.json"], files["model-selection-2x8.json"]]
    assert analytic.settings.scaling == "analytic"
    # --instance FILE: a file entry
    own = plan_experiment(shipped_experiment(
        "saturn", overrides=[f"workloads=[{{file: {THREE_JOBS}}}]"]))
    assert [cell.instance for cell in own.cells] == [load_instance(THREE_JOBS)]


def test_cached_rerun_computes_no_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = st.solve_cell

    def counting(cell: st.Cell) -> st.CellResult:
        calls.append(cell.instance.name)
        return real(cell)

    monkeypatch.setattr(st, "solve_cell", counting)
    settings = _three_jobs()
    first = compute_table(st.KIND, settings, tmp_path)
    assert calls == ["three-jobs"]
    assert len(list((tmp_path / st.CELLS_FOLDER).glob("three-jobs__*.json"))) == 1
    calls.clear()
    again = compute_table(st.KIND, settings, tmp_path)
    assert calls == []
    assert again.rows == first.rows  # the same rows, solve seconds included
    # labels are the report's: the same cell; a setting the results depend on: a new one
    relabelled = tuple((label.upper(), name, kwargs) for label, name, kwargs in settings.methods)
    compute_table(st.KIND, replace(settings, methods=relabelled), tmp_path)
    assert calls == []
    compute_table(st.KIND, replace(settings, restart_cost_s=30.0), tmp_path)
    assert calls == ["three-jobs"]


def test_cell_file_round_trips(tmp_path: Path) -> None:
    cell = st.plan_cells(_three_jobs())[0]
    result = st.solve_cell(cell)
    back = st.KIND.load(json.loads(json.dumps(st.KIND.dump(result))))
    assert replace(back, cached=False) == result


@pytest.mark.parametrize(("override", "field"), [
    ("simulator.sigma=-1", "simulator.sigma"),
    ("simulator.restart_cost_s=soon", "simulator.restart_cost_s"),
    ("simulator.bogus=1", "simulator.bogus"),
    ("settings.time_limit_s=0", "settings.time_limit_s"),
    ("settings.interval_s=-5", "settings.interval_s"),
    ("settings.threshold=1.5", "settings.threshold"),
    ("settings.solver=3", "settings.solver"),
    ("settings.colour=red", "settings.colour"),
    ("workloads[0].generator=saturn.bogus", "workloads[0].generator"),
    ("workloads[0].params.scaling=measured", "workloads[0].params.scaling"),
    ("workloads[0].params.nodes=3", "workloads[0].params.nodes"),
    ("workloads[0].file=x.json", "workloads[0]"),
    ("workloads=[]", "workloads"),
    ("seeds=[]", "seeds"),
    ("policies=[]", "policies"),
    ("policies[1].name=saturn.bogus", "policies[1].name"),
    ("policies[1].options={bogus: 1}", "policies[1].options"),
    ("policies[4].name=saturn.greedy", "policies"),
    ("report.reference=saturn.bogus", "report.reference"),
])
def test_a_bad_spec_field_is_one_input_error_naming_it(override: str, field: str) -> None:
    with pytest.raises(InputError) as info:
        plan_experiment(shipped_experiment("saturn", overrides=[override]))
    assert info.value.field == field, str(info.value)


def test_a_missing_instance_file_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    spec = shipped_experiment("saturn", overrides=[f"workloads=[{{file: {missing}}}]"])
    with pytest.raises(InputError, match=r"missing\.json"):
        plan_experiment(spec)


def test_exit_code_is_1_when_a_row_has_a_checker_violation() -> None:
    row = SaturnRow(instance="x", method="greedy", makespan_s=1.0, lower_bound_s=1.0,
                    solve_s=0.0, status="feasible", noise_sigma=0.0, seeds=1,
                    reduction_vs_current=0.0)
    assert st.KIND.exit_code(SaturnTable(TableSettings(), [row])) == 0
    bad = replace(row, note="2 checker violations")
    assert st.KIND.exit_code(SaturnTable(TableSettings(), [row, bad])) == 1


def _quick_report_files(folder: Path) -> dict[str, Any]:
    """Check the quick table's files (rows by hand: the three-jobs instance's time-indexed
    optimum is 180 s) and the manifest's file digests; returns the manifest."""
    frame = pd.read_csv(folder / st.CSV_NAME)
    assert list(frame["method"]) == [label for label, _ in PLAN_METHODS] + list(NOISY_METHODS)
    assert (frame["instance"] == "three-jobs").all()
    ti = frame[(frame["method"] == "time-indexed MILP")].iloc[0]
    assert ti["makespan_s"] == pytest.approx(180.0)  # the hand-checked optimum
    markdown = (folder / st.MARKDOWN_NAME).read_text()
    latex = (folder / st.LATEX_NAME).read_text()
    assert "| three-jobs | time-indexed MILP | - | 180.0 |" in markdown
    assert r"three-jobs & time-indexed MILP & - & 180.0 &" in latex
    assert latex.count(r"\\") == 1 + len(frame)  # header + one line per row
    assert r"$\sigma$=0.2" in latex and "σ" not in latex
    data: dict[str, Any] = json.loads((folder / st.MANIFEST_NAME).read_text())
    assert [f["name"] for f in data["files"]] == [st.MARKDOWN_NAME, st.CSV_NAME, st.LATEX_NAME]
    for entry in data["files"]:
        digest = hashlib.sha256((folder / entry["name"]).read_bytes()).hexdigest()
        assert entry["sha256"] == digest
    return data


def test_quick_experiment_writes_the_report_and_its_cell(tmp_path: Path) -> None:
    spec = shipped_experiment("saturn", variants=["quick"],
                              overrides=["simulator.restart_cost_s=30"])
    outcome = run_experiment(spec, tmp_path)
    assert outcome.exit_code == 0
    assert "restart cost 30 s" in outcome.markdown
    data = _quick_report_files(tmp_path)
    assert data["seeds"] == [0] and data["settings"]["restart_cost_s"] == 30.0
    assert data["experiment"]["simulator"]["restart_cost_s"] == 30
    assert len(list((tmp_path / st.CELLS_FOLDER).glob("three-jobs__*.json"))) == 1


def test_cli_tables_saturn(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["tables", "saturn", "--quick", "--restart-cost", "30", "--out", str(tmp_path)]
    code = main(argv)
    out, _ = capsys.readouterr()
    assert code == 0
    assert "three-jobs" in out and "introspective" in out and "time-indexed MILP" in out
    assert "restart cost 30 s" in " ".join(out.split())
    # --quick --out: the same rows as Markdown, CSV and LaTeX, and a manifest of the files
    data = _quick_report_files(tmp_path)
    assert data["command"] == ["schedlab", *argv]
    assert data["seeds"] == [0] and data["settings"]["restart_cost_s"] == 30.0


def test_cli_tables_needs_a_table_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tables"]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("error:") and "TABLE" in err


def test_cli_tables_bad_instance_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["tables", "saturn", "--instance", str(tmp_path / "missing.json")]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "missing.json" in err
