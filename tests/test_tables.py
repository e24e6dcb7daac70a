"""``schedlab tables saturn``: the table function and the command line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from schedlab.analysis.tables import saturn as st
from schedlab.analysis.tables.saturn import (
    NOISY_METHODS,
    PLAN_METHODS,
    TableSettings,
    load_instances,
    render,
    saturn_table,
    steps,
)
from schedlab.cli import main

THREE_JOBS = Path(__file__).resolve().parents[1] / "instances" / "saturn" / "three-jobs.json"


def test_saturn_table_rows_for_every_method() -> None:
    settings = TableSettings(time_limit_s=5.0, seeds=(0, 1), resolve_time_limit_s=0.5)
    instances = load_instances([THREE_JOBS])
    seen: list[str] = []
    rows = saturn_table(instances, settings, on_step=seen.append)
    assert len(seen) == steps(1, settings)
    methods = [row.method for row in rows]
    assert methods == [label for label, _ in PLAN_METHODS] + list(NOISY_METHODS)
    for row in rows:
        assert row.makespan_s >= row.lower_bound_s - 1e-6, row
        assert 0 <= row.gap < 1
        assert "violation" not in row.note
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
    assert render(rows, settings).row_count == len(rows)
    # noisy rows: mean ± sample std over the two seeds; plans have no spread
    for row in rows:
        assert (row.makespan_std_s > 0) == (row.noise_sigma > 0), row
    intro = by_method["introspective", 0.2]
    markdown = st.render_markdown(rows, settings)
    assert f"| {intro.makespan_s:,.1f} ± {intro.makespan_std_s:,.1f} |" in markdown


def test_cli_tables_saturn(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["tables", "saturn", "--quick", "--restart-cost", "30", "--out", str(tmp_path)]
    code = main(argv)
    out, _ = capsys.readouterr()
    assert code == 0
    assert "three-jobs" in out and "introspective" in out and "time-indexed MILP" in out
    assert "restart cost 30 s" in " ".join(out.split())
    # --quick --out: the same rows as Markdown, CSV and LaTeX, and a manifest of the files
    frame = pd.read_csv(tmp_path / st.CSV_NAME)
    assert list(frame["method"]) == [label for label, _ in PLAN_METHODS] + list(NOISY_METHODS)
    assert (frame["instance"] == "three-jobs").all()
    ti = frame[(frame["method"] == "time-indexed MILP")].iloc[0]
    assert ti["makespan_s"] == pytest.approx(180.0)  # the hand-checked optimum
    markdown = (tmp_path / st.MARKDOWN_NAME).read_text()
    latex = (tmp_path / st.LATEX_NAME).read_text()
    assert "| three-jobs | time-indexed MILP | - | 180.0 |" in markdown
    assert r"three-jobs & time-indexed MILP & - & 180.0 &" in latex
    assert latex.count(r"\\") == 1 + len(frame)  # header + one line per row
    assert r"$\sigma$=0.2" in latex and "σ" not in latex
    data = json.loads((tmp_path / st.MANIFEST_NAME).read_text())
    assert data["command"] == ["schedlab", *argv]
    assert data["seeds"] == [0] and data["settings"]["restart_cost_s"] == 30.0
    assert [f["name"] for f in data["files"]] == [st.MARKDOWN_NAME, st.CSV_NAME, st.LATEX_NAME]
    for entry in data["files"]:
        digest = hashlib.sha256((tmp_path / entry["name"]).read_bytes()).hexdigest()
        assert entry["sha256"] == digest


def test_cli_tables_needs_a_table_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tables"]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("error:") and "TABLE" in err


def test_cli_tables_bad_instance_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["tables", "saturn", "--instance", str(tmp_path / "missing.json")]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "missing.json" in err
