"""``schedlab tables pollux`` and ``schedlab tables sia``: the goodput tables (Pollux §5.3, Sia
Table 4).

Each ``--quick`` table (Pollux: workload 6's first 12 jobs; Sia: workload 1's first 12) is run
once for the module, both at once, each by the command line in its own process with one
worker and ``OPENBLAS_NUM_THREADS=1``: where the 2 cores are oversubscribed (other tests, two
workers) OpenBLAS' threads make the goodput job model's small linear algebra (the throughput
fit, the profiles' interpolation) several times slower (measured on this machine: the quick
Sia table 27 s with two workers and default threads, 9 s with one BLAS thread; one Pollux cell
at load average 5, 33 s against 2 s).  The checks read the files the runs wrote; a re-run in
this process must compute no cell.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from schedlab.analysis.experiments.runner import plan_experiment, run_experiment
from schedlab.analysis.experiments.spec import shipped_experiment
from schedlab.analysis.tables.pollux import CellResult
from schedlab.errors import InputError

TABLES = ("pollux", "sia")
QUICK_JOBS = 12


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both quick tables, run at once by the command line; table -> output folder."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    folders = {table: tmp_path_factory.mktemp(table) for table in TABLES}
    processes = {table: subprocess.Popen(
        [sys.executable, "-m", "schedlab", "tables", table, "--quick", "--workers", "1",
         "--out", str(folders[table]), "-q"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for table in TABLES}
    for table, process in processes.items():
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, f"{table}: {stderr}\n{stdout}"
    return folders


def quick_plan(table: str):  # type: ignore[no-untyped-def]
    return plan_experiment(shipped_experiment(table, variants=["quick"]))


def cell_results(table: str, folder: Path) -> dict[tuple[str, str, int], CellResult]:
    plan = quick_plan(table)
    out = {}
    for cell in plan.cells:
        path = folder / "cells" / cell.file_name
        assert path.is_file(), f"{table}: missing cell {cell.file_name}"
        out[cell.workload, cell.policy, cell.seed] = CellResult.from_json(
            json.loads(path.read_text()))
    return out


@pytest.mark.parametrize("table", TABLES)
def test_every_cell_is_written_and_every_job_finished(runs: dict[str, Path],
                                                      table: str) -> None:
    folder = runs[table]
    results = cell_results(table, folder)
    plan = quick_plan(table)
    assert len(results) == len(plan.cells) == len(plan.spec.policies)
    assert not list((folder / "cells").glob("*.claim"))
    for key, result in results.items():
        assert len(result.jobs) == QUICK_JOBS, key
        assert result.jobs["finish"].notna().all(), key
        assert (result.jobs["finish"] > result.jobs["arrival"]).all(), key
        assert result.stopped != "max_rounds" and result.rounds > 0, key
    frame = pd.read_csv(folder / f"{table}.csv")
    assert set(frame["policy"]) == {p.name for p in plan.spec.policies}
    assert (frame["unfinished"] == 0).all()
    for name in ("md", "tex", "manifest.json"):
        assert (folder / f"{table}.{name}").is_file()


def test_gavel_runs_at_sias_360_s_rounds(runs: dict[str, Path]) -> None:
    intervals = {policy: result.interval
                 for (_, policy, _), result in cell_results("sia", runs["sia"]).items()}
    assert intervals == {"sia": 60.0, "pollux": 60.0, "gavel.max_min_fairness": 360.0}


def test_pollux_markdown_has_the_authors_stored_results(runs: dict[str, Path]) -> None:
    text = (runs["pollux"] / "pollux.md").read_text()
    assert ("authors' stored results, Pollux osdi21-artifact "
            "results-jobload/*-1.0/summary.json") in text
    assert "| Pollux (p = -1) | 0.764 | 16.81 |" in text
    assert "| Optimus+Oracle+TunedJobs | 1.578 | 18.71 |" in text
    assert "| Tiresias+TunedJobs | 1.122 | 24.19 |" in text
    assert "paper -32 %" in text


def test_sia_markdown_has_table_4(runs: dict[str, Path]) -> None:
    text = (runs["sia"] / "sia.md").read_text()
    assert "Table 4" in text
    for row in ("| Sia | 1.9 | 18.1 | 21.4 | 8.4 |", "| Pollux | 2.0 | 19.3 | 21.7 | 8.6 |",
                "| Gavel+TunedJobs | 4.3 | 37.1 | 44.3 | 15.3 |"):
        assert row in text


@pytest.mark.parametrize("table", TABLES)
def test_a_rerun_computes_no_cell(runs: dict[str, Path], table: str) -> None:
    seen: list[str] = []
    outcome = run_experiment(quick_plan(table), runs[table], on_cell=seen.append)
    assert outcome.exit_code == 0
    assert len(seen) == len(quick_plan(table).cells)
    assert all(note.endswith("(cached)") for note in seen), seen


def _avg_jct(folder: Path, table: str, policy: str) -> float:
    frame = pd.read_csv(folder / f"{table}.csv")
    row = frame[(frame["policy"] == policy) & (frame["stat"] == "mean")]
    value = float(row["avg_jct_s"].iloc[0])
    assert math.isfinite(value)
    return value


def test_claim_pollux_lower_average_jct_than_tiresias_holds(runs: dict[str, Path]) -> None:
    """Pollux's README: about 32 % lower average JCT than Tiresias+TunedJobs (quick size)."""
    folder = runs["pollux"]
    assert _avg_jct(folder, "pollux", "pollux") < _avg_jct(folder, "pollux", "tiresias")


def test_claim_sia_lower_average_jct_than_gavel_holds(runs: dict[str, Path]) -> None:
    """Sia's Table 4: Sia 1.9 h against Gavel+TunedJobs 4.3 h (quick size)."""
    folder = runs["sia"]
    assert _avg_jct(folder, "sia", "sia") < _avg_jct(folder, "sia", "gavel.max_min_fairness")


def test_heterogeneous_needs_sias_profiles_and_workloads(tmp_path: Path) -> None:
    with pytest.raises(InputError) as error:
        plan_experiment(shipped_experiment("sia", variants=["heterogeneous_quick"]))
    assert error.value.field == "workloads[0].params.folder"
    with pytest.raises(InputError) as error:
        plan_experiment(shipped_experiment(
            "sia", variants=["heterogeneous_quick"],
            overrides=[f"workloads[0].params.folder={tmp_path}"]))
    assert error.value.field == "settings.profiles"
    assert "no licence" in error.value.reason
