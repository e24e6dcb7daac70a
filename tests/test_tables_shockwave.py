"""``schedlab tables shockwave``: the table kind, its shipped spec, its cache and the command
line.

Expected values are re-derived here from a simulation run in the test (plain Python over the
job records, not :mod:`schedlab.analysis.metrics`), or from the CSV's own per-seed rows.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import quick_cli_on_spec_cells

from schedlab.analysis.experiments.runner import (
    compute_table,
    plan_experiment,
    run_experiment,
    write_outputs,
)
from schedlab.analysis.experiments.spec import shipped_experiment
from schedlab.analysis.tables import output
from schedlab.analysis.tables import shockwave as sw
from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.policies.registry import POLICIES as REGISTRY
from schedlab.simulator import simulate
from schedlab.workloads.shockwave import generate_shockwave_instance

REL = 1e-9
#: Two cheap policies that exist today (AlloX first: the reference when Shockwave is absent).
CHEAP = (("AlloX", "allox"), ("Gandiva-fair", "gandiva_fair"))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, quick_table: Path
              ) -> tuple[int, Path, str]:
    """The quick table through the command line, once for the module, on the cells of the
    shipped spec's quick variant (:func:`conftest.quick_cli_on_spec_cells`: the old command
    and the spec plan the same cells and write the same table)."""
    return quick_cli_on_spec_cells("shockwave", quick_table, tmp_path_factory.mktemp("quick"))


@pytest.fixture(scope="module")
def quick_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped spec's quick variant run by the experiment runner (no command line),
    once for the module: its output folder."""
    out = tmp_path_factory.mktemp("quick-spec")
    run_experiment(shipped_experiment("shockwave", variants=["quick"]), out)
    return out


def _csv(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / sw.CSV_NAME)


def _rho_by_hand(num_jobs: int, gpus: int, seed: int, policy: str,
                 throughputs: str = sw.DEFAULT_THROUGHPUTS, mechanism: str = "gavel",
                 resume_overhead_s: float = sw.RESUME_OVERHEAD_S
                 ) -> tuple[list[float], list[float], float]:
    """An independent simulation: (JCT_j, rho_j = JCT_j / (t_j max(1, J/G)), makespan)."""
    instance = generate_shockwave_instance(num_jobs, {"v100": gpus}, seed,
                                           throughputs=throughputs)
    # the table's simulator settings (default: Shockwave's, Gavel's mechanism and 20 s)
    result = simulate(instance, policy=sw.shockwave_simulator_policy(policy, mechanism),
                      seed=seed,
                      mechanism=mechanism,  # type: ignore[arg-type]
                      resume_overhead_s=resume_overhead_s)
    records = result.jobs
    assert all(r.finish is not None for r in records)
    jct = [r.finish - r.arrival for r in records]  # type: ignore[operator]
    contention = max(1.0, num_jobs / gpus)
    rho = [t / (r.isolated_time_s * contention) for t, r in zip(jct, records, strict=True)]
    span = (max(r.finish for r in records)  # type: ignore[type-var]
            - min(r.arrival for r in records))
    return jct, rho, span


def _by_hand(num_jobs: int, gpus: int, seed: int, policy: str,
             threshold: float = 1.05, throughputs: str = sw.DEFAULT_THROUGHPUTS,
             mechanism: str = "gavel", resume_overhead_s: float = sw.RESUME_OVERHEAD_S
             ) -> dict[str, float]:
    """The four metrics from an independent simulation, computed over JobRecords."""
    jct, rho, span = _rho_by_hand(num_jobs, gpus, seed, policy, throughputs, mechanism,
                                  resume_overhead_s)
    return {
        "makespan_s": span,
        "avg_jct_s": sum(jct) / len(jct),
        "worst_rho": max(rho),
        "unfair_fraction": sum(1 for v in rho if v > threshold) / len(rho),
    }


# ------------------------------------------------------------------------ command line


def test_quick_cli_writes_markdown_csv_and_png(quick_run: tuple[int, Path, str]) -> None:
    code, folder, out = quick_run
    assert code == 0
    for name in (sw.MARKDOWN_NAME, sw.CSV_NAME, sw.PLOT_NAME):
        assert (folder / name).is_file(), name
    assert (folder / sw.PLOT_NAME).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (folder / sw.MARKDOWN_NAME).read_text()
    assert markdown == out.split("wrote ")[0]  # what was printed is the file
    for label, name in sw.POLICIES:
        if name in sw.QUICK_POLICY_NAMES:
            assert f"| {label} |" in markdown
    assert "12 Shockwave jobs" in markdown and "4 V100 GPUs" in markdown
    frame = _csv(folder)
    seed_rows = frame[frame["stat"] == "seed"]
    assert sorted(seed_rows["policy"]) == sorted(sw.QUICK_POLICY_NAMES)
    assert set(seed_rows["seed"]) == {25}
    ok = seed_rows[seed_rows["status"] == "ok"]
    assert (ok["jobs"] == 12).all() and (ok["finished"] == 12).all()
    assert list((folder / sw.CELLS_FOLDER).glob("*.json"))

def test_quick_cli_writes_latex_and_a_manifest(quick_run: tuple[int, Path, str],
                                              assert_table_files: Callable[..., None]) -> None:
    """The same rows as LaTeX; a manifest with the command, seeds and each file's sha256."""
    _, folder, _ = quick_run
    assert_table_files(sw, folder, "shockwave", [25])



def test_quick_csv_metrics_rederive_from_an_independent_simulation(
        quick_table: Path) -> None:
    frame = _csv(quick_table)
    assert sorted(frame[frame["stat"] == "seed"]["policy"]) == sorted(sw.QUICK_POLICY_NAMES)
    for policy in ("allox", "gavel.max_min_fairness"):
        row = frame[(frame["policy"] == policy) & (frame["stat"] == "seed")].iloc[0]
        expected = _by_hand(12, 4, 25, policy)
        for key, value in expected.items():
            assert row[key] == pytest.approx(value, rel=REL), (policy, key)


def test_quick_csv_ratios_are_values_over_the_reference(quick_table: Path) -> None:
    frame = _csv(quick_table)
    seed_rows = frame[(frame["stat"] == "seed") & (frame["status"] == "ok")]
    # Shockwave when it is registered, else the first available policy of the quick list
    available = [n for n in sw.QUICK_POLICY_NAMES if n in REGISTRY]
    reference = "shockwave" if "shockwave" in available else available[0]
    assert set(frame["reference"]) == {reference}
    ref = seed_rows[seed_rows["policy"] == reference].iloc[0]
    for _, row in seed_rows.iterrows():
        for key, _ in sw.METRICS:
            if ref[key] == 0:
                assert math.isnan(row[f"{key}_ratio"])
            else:
                assert row[f"{key}_ratio"] == pytest.approx(row[key] / ref[key], rel=1e-12)


def test_cli_unknown_policy_name_exits_2_with_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["tables", "shockwave", "--quick", "--out", str(tmp_path),
                 "--policies", "allox,no_such_policy"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("error:") and err.count("\n") == 1 and "no_such_policy" in err
    assert not (tmp_path / sw.CSV_NAME).exists()


@pytest.mark.parametrize("seeds", ["0", "-1", "two"])
def test_cli_seeds_below_one_exit_2_with_one_line(
        seeds: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["tables", "shockwave", "--quick", "--out", str(tmp_path), "--seeds", seeds])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("error:") and err.count("\n") == 1 and "--seeds" in err


def test_cli_out_must_be_a_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x")
    code = main(["tables", "shockwave", "--quick", "--out", str(target)])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "--out" in err


def test_select_policies_keeps_labels_and_accepts_other_registered_names() -> None:
    chosen = sw.select_policies(["gavel.max_min_fairness", "fifo", "shockwave"])
    assert chosen == (("Gavel", "gavel.max_min_fairness"), ("fifo", "fifo"),
                      ("Shockwave", "shockwave"))


# ----------------------------------------------------------------------------- the table


def _settings(**changes: Any) -> sw.TableSettings:
    return replace(sw.quick_settings(), **{"policies": CHEAP, **changes})


def _table(settings: sw.TableSettings, folder: Path, workers: int = 1) -> sw.ShockwaveTable:
    table = compute_table(sw.KIND, settings, folder, workers=workers)
    assert isinstance(table, sw.ShockwaveTable)
    return table


def _markdown(table: sw.ShockwaveTable) -> str:
    return output.render_markdown(sw.document(table))


def test_two_seeds_aggregate_as_mean_and_sample_std(tmp_path: Path) -> None:
    # Gavel's throughputs, schedlab's mechanism and no resume overhead: their seed 27 has the
    # job near the threshold checked below
    old = {"mechanism": "schedlab", "resume_overhead_s": 0.0}
    settings = _settings(seeds=(26, 27), throughputs="gavel", **old)
    table = _table(settings, tmp_path)
    write_outputs(sw.KIND, settings, table, tmp_path)
    frame = _csv(tmp_path)
    assert table.reference == ("AlloX", "allox")
    for name in ("allox", "gandiva_fair"):
        rows = frame[frame["policy"] == name]
        per_seed = rows[rows["stat"] == "seed"]
        assert sorted(per_seed["seed"]) == [26, 27]
        mean = rows[rows["stat"] == "mean"].iloc[0]
        std = rows[rows["stat"] == "std"].iloc[0]
        for key, _ in sw.METRICS:
            values = list(per_seed[key])
            assert mean[key] == pytest.approx(statistics.fmean(values), rel=REL)
            assert std[key] == pytest.approx(statistics.stdev(values), rel=REL, abs=1e-12)
        # seed 27 re-derived by hand
        row27 = per_seed[per_seed["seed"] == 27].iloc[0]
        for key, value in _by_hand(12, 4, 27, name, throughputs="gavel", **old).items():
            assert row27[key] == pytest.approx(value, rel=REL)
    # the check can tell the threshold: Gandiva-fair on seed 27 has a job with 1 < rho <= 1.05
    _, rho, _ = _rho_by_hand(12, 4, 27, "gandiva_fair", "gavel", "schedlab", 0.0)
    assert any(1.0 < v <= 1.05 for v in rho)
    allox = frame[(frame["policy"] == "allox") & (frame["stat"] == "seed")]
    assert (allox["makespan_s_ratio"] == 1.0).all()


def test_unfair_threshold_is_the_settings(tmp_path: Path) -> None:
    themis = "gavel.finish_time_fairness"
    settings = _settings(seeds=(27,), policies=(("Themis", themis),), unfair_threshold=1.5,
                         throughputs="gavel")
    row = _table(settings, tmp_path).seed_rows[0]
    _, rho, _ = _rho_by_hand(12, 4, 27, themis, "gavel")
    above = sum(1 for v in rho if v > 1.5)
    assert above != sum(1 for v in rho if v > 1.05)  # the threshold matters here
    assert row.values["unfair_fraction"] == pytest.approx(above / 12, rel=REL)


def count_simulations(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The (policy, seed) of every cell simulated from now on (cached cells are not)."""
    calls: list[tuple[str, int]] = []
    real = sw.simulate_cell

    def counting(cell: sw.Cell) -> sw.CellResult:
        calls.append((cell.policy, cell.seed))
        return real(cell)

    monkeypatch.setattr(sw, "simulate_cell", counting)
    return calls


def test_cached_cells_are_reused_without_simulating(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_simulations(monkeypatch)
    settings = _settings(seeds=(25, 26))
    first = _table(settings, tmp_path)
    assert sorted(calls) == sorted((p, s) for _, p in CHEAP for s in (25, 26))
    files = sorted((tmp_path / sw.CELLS_FOLDER).glob("*.json"))
    assert len(files) == 4
    stamps = {f: f.stat().st_mtime_ns for f in files}

    calls.clear()
    again = _table(settings, tmp_path)
    assert calls == []
    assert {f: f.stat().st_mtime_ns for f in files} == stamps
    assert all(row.cached for row in again.seed_rows)
    for old, new in zip(first.seed_rows, again.seed_rows, strict=True):
        for key, _ in sw.METRICS:
            assert new.values[key] == pytest.approx(old.values[key], rel=REL)

    # an interrupted run left one cell missing: only that one is simulated again
    missing = next(f for f in files if f.name.startswith("gandiva_fair__seed26__"))
    missing.unlink()
    _table(settings, tmp_path)
    assert calls == [("gandiva_fair", 26)]


def test_a_cell_of_another_trace_is_not_reused(tmp_path: Path) -> None:
    _table(_settings(), tmp_path)
    _table(_settings(num_jobs=10), tmp_path)
    # 2 policies x (12-job trace, 10-job trace): four distinct cell files
    assert len(list((tmp_path / sw.CELLS_FOLDER).glob("*.json"))) == 4


def test_a_cell_of_another_throughput_source_is_not_reused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sw.TableSettings().throughputs == "shockwave-tacc"
    instance = sw.build_instance(_settings(), 25)
    assert sw.cell_key(instance, "allox", "gavel") != sw.cell_key(instance, "allox",
                                                                  "shockwave-tacc")
    # the simulator's settings are part of the key too
    keys = {sw.cell_key(instance, "allox", "gavel", mechanism, overhead)
            for mechanism in ("gavel", "schedlab") for overhead in (0.0, 20.0)}
    assert len(keys) == 4
    calls = count_simulations(monkeypatch)
    _table(_settings(throughputs="gavel"), tmp_path)
    table = _table(_settings(), tmp_path)
    assert calls == [(p, 25) for _, p in CHEAP] * 2
    assert not any(row.cached for row in table.seed_rows)
    assert "shockwave-tacc throughputs" in _markdown(table)


def test_cli_throughputs_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["tables", "shockwave", "--quick", "--policies", "allox", "--workers", "1",
                 "--throughputs", "gavel", "--out", str(tmp_path)])
    out, _ = capsys.readouterr()
    assert code == 0 and "gavel throughputs" in out
    row = _csv(tmp_path).iloc[0]
    assert row["makespan_s"] == pytest.approx(
        _by_hand(12, 4, 25, "allox", throughputs="gavel")["makespan_s"], rel=REL)
    code = main(["tables", "shockwave", "--quick", "--throughputs", "tacc",
                 "--out", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("error:") and err.count("\n") == 1
    assert "--throughputs" in err


def test_parallel_workers_give_the_same_cells(tmp_path: Path) -> None:
    serial = _table(_settings(), tmp_path / "serial")
    parallel = _table(_settings(), tmp_path / "parallel", workers=2)
    assert not any(row.cached for row in parallel.seed_rows)
    for a, b in zip(serial.seed_rows, parallel.seed_rows, strict=True):
        assert (a.policy, a.seed) == (b.policy, b.seed)
        for key, _ in sw.METRICS:
            assert b.values[key] == pytest.approx(a.values[key], rel=REL)


def test_unknown_policy_gives_not_available_row_and_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = _settings(policies=(("Ghost", "no_such_policy"), *CHEAP))
    with caplog.at_level(logging.WARNING, logger="schedlab"):
        table = _table(settings, tmp_path)
    assert any("no_such_policy" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    ghost = table.policy_rows[0]
    assert not ghost.available and ghost.note == sw.NOT_AVAILABLE
    # the reference falls to the first available policy, and the header says so
    assert table.reference == ("AlloX", "allox") and not table.reference_is_shockwave
    assert table.ratio_header == "AlloX (Shockwave not available)"
    write_outputs(sw.KIND, settings, table, tmp_path)
    markdown = (tmp_path / sw.MARKDOWN_NAME).read_text()
    assert "| Ghost |" in markdown and "not available" in markdown
    assert "AlloX (Shockwave not available)" in markdown
    frame = _csv(tmp_path)
    ghost_rows = frame[frame["policy"] == "no_such_policy"]
    assert set(ghost_rows["status"]) == {sw.NOT_AVAILABLE}
    assert ghost_rows["makespan_s"].isna().all()


def test_no_available_policy_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="none of the table's policies"):
        _table(_settings(policies=(("Ghost", "no_such_policy"),)), tmp_path)


def test_ratio_is_undefined_for_a_zero_reference() -> None:
    assert sw.ratio(0.25, 0.5) == 0.5
    assert math.isnan(sw.ratio(0.25, 0.0)) and math.isnan(sw.ratio(math.nan, 1.0))


@pytest.mark.skipif("shockwave" not in REGISTRY,
                    reason="the Shockwave policy is not registered yet")
def test_ratios_are_to_shockwave_when_it_is_registered(tmp_path: Path) -> None:
    settings = _settings(policies=(("AlloX", "allox"), ("Shockwave", "shockwave")))
    table = _table(settings, tmp_path)
    assert table.reference == ("Shockwave", "shockwave") and table.reference_is_shockwave
    rows = {row.policy: row for row in table.seed_rows}
    for key, _ in sw.METRICS:
        value = rows["shockwave"].values[key]
        if value:
            assert rows["shockwave"].ratios[key] == 1.0
            assert rows["allox"].ratios[key] == pytest.approx(
                rows["allox"].values[key] / value, rel=1e-12)
    shockwave = _by_hand(12, 4, 25, "shockwave")
    for key, value in shockwave.items():
        assert rows["shockwave"].values[key] == pytest.approx(value, rel=REL)
    assert "Shockwave not available" not in _markdown(table)


# ------------------------------------------------------------------------- the shipped spec


def test_shipped_spec_is_the_table_and_its_quick_variant_the_quick_table() -> None:
    """The default document is TableSettings(), its cells those of the old cells_count (every
    policy registered); `quick` expands to exactly the cells of quick_settings()."""
    full = plan_experiment(shipped_experiment("shockwave"))
    assert full.settings == sw.TableSettings()
    assert len(full.cells) == len(full.settings.seeds) * len(full.settings.policies) == 24
    quick = plan_experiment(shipped_experiment("shockwave", variants=["quick"]))
    assert quick.settings == sw.quick_settings()
    expected = sorted(cell.file_name for cell in sw.plan_cells(sw.quick_settings()))
    assert sorted(cell.file_name for cell in quick.cells) == expected and len(expected) == 4


@pytest.mark.parametrize(("override", "field"), [
    ("workloads[0].params.num_jobs=0", "workloads[0].params.num_jobs"),
    ("workloads[0].params.gpus=2.5", "workloads[0].params.gpus"),
    ("workloads[0].params.throughputs=tacc", "workloads[0].params.throughputs"),
    ("workloads[0].params.jobs=12", "workloads[0].params.jobs"),
    ("workloads[0].generator=titan.paper", "workloads[0].generator"),
    ("simulator.mechanism=ours", "simulator.mechanism"),
    ("simulator.resume_overhead_s=-1", "simulator.resume_overhead_s"),
    ("simulator.round_s=0", "simulator.round_s"),
    ("settings.unfair_threshold=x", "settings.unfair_threshold"),
    ("settings.workers=2", "settings.workers"),
    ("policies[1].name=no_such_policy", "policies[1].name"),
    ("policies[1].name=shockwave", "policies[1].name"),
    ("policies[0].options={alpha: 1}", "policies[0].options"),
    ("policies=[]", "policies"),
    ("seeds=[]", "seeds"),
])
def test_a_bad_spec_field_is_one_input_error_naming_its_path(override: str, field: str
                                                             ) -> None:
    spec = shipped_experiment("shockwave", overrides=[override], variants=["quick"])
    with pytest.raises(InputError) as caught:
        plan_experiment(spec)
    assert caught.value.field == field, str(caught.value)


def test_spec_policies_without_labels_get_the_tables_labels() -> None:
    """What `--policies A,B` becomes: rows by name, labelled as select_policies labels them."""
    spec = shipped_experiment("shockwave", variants=["quick"], overrides=[
        "policies=[{name: gavel.max_min_fairness}, {name: fifo}, {name: shockwave}]",
        "workloads[0].params.throughputs=gavel", "simulator.mechanism=schedlab",
        "simulator.resume_overhead_s=0", "seeds=[26, 27]"])
    settings = sw.settings_from_spec(spec)
    assert settings.policies == sw.select_policies(["gavel.max_min_fairness", "fifo",
                                                    "shockwave"])
    assert settings == replace(sw.quick_settings(), policies=settings.policies,
                               throughputs="gavel", mechanism="schedlab",
                               resume_overhead_s=0.0, seeds=(26, 27))


# ------------------------------------------------------------- the paper's claims, in direction


@pytest.fixture(scope="module")
def published_trace(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The table's default setting on seed 25 -- Shockwave's published trace (120 jobs, 32
    V100s, its throughputs, Gavel's mechanism, 20 s resume overhead) -- for Shockwave, Themis,
    Gavel and AlloX: the mean rows, by label (~30-60 s, the Shockwave row)."""
    folder = tmp_path_factory.mktemp("published")
    chosen = tuple(pair for pair in sw.POLICIES if pair[1] in sw.QUICK_POLICY_NAMES)
    settings = sw.TableSettings(seeds=(25,), policies=chosen)
    table = _table(settings, folder)
    write_outputs(sw.KIND, settings, table, folder)
    frame = _csv(folder)
    return frame[frame["stat"] == "mean"].set_index("label")


def test_claim_shorter_makespan_than_every_baseline_holds(published_trace: pd.DataFrame
                                                          ) -> None:
    """Shockwave's claim, in direction, on its published trace: a shorter makespan than Gavel
    (max-min fairness), Themis and AlloX (the paper: about 1.3x)."""
    for baseline in ("Gavel", "Themis", "AlloX"):
        assert (published_trace.loc[baseline, "makespan_s"]
                > 1.1 * published_trace.loc["Shockwave", "makespan_s"]), baseline


def test_claim_lower_unfair_fraction_holds_on_the_published_trace(
        published_trace: pd.DataFrame) -> None:
    """Shockwave's claim, in direction, on its published trace: a lower unfair fraction than
    Gavel, Themis and AlloX (the paper: about half; Shockwave's own pickle: 0.05 against
    0.22-0.28).  Seeds 26 and 27 are reported in docs/reproduction.md as measured."""
    for baseline in ("Gavel", "Themis", "AlloX"):
        assert (published_trace.loc["Shockwave", "unfair_fraction"]
                < 0.5 * published_trace.loc[baseline, "unfair_fraction"]), baseline
