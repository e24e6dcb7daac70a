"""``schedlab tables gavel``: table shape, each cell against a simulation run here, the
direction of Gavel's claim, the cache, the shipped spec and the CLI.

Every expected average JCT is recomputed in the test: the workload is rebuilt here (the trace
file read and cut to its earliest arrivals by hand, the generator called directly with
``multi_gpu=False``), simulated with the named policy and seed, and averaged over the jobs
from the per-job table's finish and arrival columns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import quick_cli_on_spec_cells

from schedlab.analysis.experiments.runner import (
    compute_table,
    plan_experiment,
    run_experiment,
)
from schedlab.analysis.experiments.spec import shipped_experiment
from schedlab.analysis.tables import gavel as gt
from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.instance import Instance, load_instance
from schedlab.policies.registry import get_policy
from schedlab.simulator.engine import simulate
from schedlab.workloads.gavel import generate_gavel_instance

REL = 1e-9
CLUSTER = {"v100": 36, "p100": 36, "k80": 36}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, quick_folder: Path
              ) -> tuple[int, Path, str]:
    """The quick table through the command line, once for the module, on the cells of the
    shipped spec's quick variant (:func:`conftest.quick_cli_on_spec_cells`: the old command
    and the spec plan the same cells and write the same table)."""
    return quick_cli_on_spec_cells("gavel", quick_folder, tmp_path_factory.mktemp("quick"))


@pytest.fixture(scope="module")
def quick_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped spec's quick variant through the experiment runner (one worker), once
    for the module: its output folder."""
    out = tmp_path_factory.mktemp("quick_spec")
    spec = shipped_experiment("gavel", variants=["quick"], overrides=["run.workers=1"])
    assert run_experiment(spec, out).exit_code == 0
    return out


def _seed_rows(folder: Path) -> pd.DataFrame:
    frame = pd.read_csv(folder / gt.CSV_NAME)
    return frame[frame["stat"] == "seed"]


def _trace_head(count: int) -> Instance:
    """The trace's ``count`` earliest arrivals (ties in file order), cut by hand."""
    instance = load_instance(gt.default_trace())
    order = sorted(range(len(instance.jobs)), key=lambda i: (instance.jobs[i].arrival, i))
    keep = {instance.jobs[i].id for i in order[:count]}
    return instance.model_copy(update={"jobs": [j for j in instance.jobs if j.id in keep]})


def _direct_avg_jct(instance: Instance, policy: str, seed: int) -> float:
    result = simulate(instance, policy=get_policy(policy), round_s=360.0, seed=seed)
    frame = result.to_dataframe()
    assert frame["finish"].notna().all()
    return float((frame["finish"] - frame["arrival"]).mean())


def test_quick_cli_writes_every_file(quick_run: tuple[int, Path, str]) -> None:
    code, folder, out = quick_run
    assert code == 0
    for name in (gt.MARKDOWN_NAME, gt.CSV_NAME, gt.LATEX_NAME, gt.PLOT_NAME, gt.MANIFEST_NAME):
        assert (folder / name).is_file(), name
    assert (folder / gt.PLOT_NAME).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (folder / gt.MARKDOWN_NAME).read_text() == out.split("wrote ")[0]
    manifest = json.loads((folder / gt.MANIFEST_NAME).read_text())
    assert manifest["table"] == "gavel" and manifest["seeds"] == [0]
    assert {f["name"] for f in manifest["files"]} == {
        gt.MARKDOWN_NAME, gt.CSV_NAME, gt.LATEX_NAME, gt.PLOT_NAME}


def test_quick_table_shape(quick_folder: Path) -> None:
    folder = quick_folder
    markdown = (folder / gt.MARKDOWN_NAME).read_text()
    header = "| policy | trace | 2 jobs/h | 6 jobs/h |"
    assert markdown.count(header) == 2  # the JCT block and the ratio block
    for label, _, _ in gt.PAIRS:
        for side in ("aware", "agnostic"):
            assert sum(ln.startswith(f"| {label}, {side} |") for ln in markdown.splitlines()) == 1
        assert sum(ln.startswith(f"| {label} |") for ln in markdown.splitlines()) == 1
    rows = _seed_rows(folder)
    # 3 pairs x 3 workloads (trace, 2 and 6 jobs/h) x 1 seed
    assert len(rows) == 9
    assert set(rows["workload"]) == {"trace", "rate2", "rate6"}
    assert sorted(rows["aware"].unique()) == sorted(a for _, a, _ in gt.PAIRS)
    latex = (folder / gt.LATEX_NAME).read_text()
    assert latex.count(r"\begin{tabular}{lrrr}") == 2


def test_each_cell_equals_a_direct_simulation(quick_folder: Path) -> None:
    folder = quick_folder
    rows = _seed_rows(folder)
    instances = {
        "trace": _trace_head(40),
        "rate2": generate_gavel_instance(30, CLUSTER, 0, jobs_per_hour=2.0, multi_gpu=False),
        "rate6": generate_gavel_instance(30, CLUSTER, 0, jobs_per_hour=6.0, multi_gpu=False),
    }
    assert len(instances["trace"].jobs) == 40
    for row in rows.itertuples():
        instance = instances[str(row.workload)]
        aware = _direct_avg_jct(instance, str(row.aware), 0)
        agnostic = _direct_avg_jct(instance, str(row.agnostic), 0)
        assert row.aware_jct_s == pytest.approx(aware, rel=REL), (row.workload, row.aware)
        assert row.agnostic_jct_s == pytest.approx(agnostic, rel=REL), (row.workload,
                                                                        row.agnostic)
        assert row.ratio == pytest.approx(agnostic / aware, rel=REL)


def test_awareness_lowers_average_jct_at_the_highest_quick_rate(quick_folder: Path) -> None:
    """Gavel's claim, in direction: at 6 jobs/h the heterogeneity-aware max-min fairness
    (and FIFO, and finish-time fairness) has the lower average JCT."""
    folder = quick_folder
    rows = _seed_rows(folder)
    top = rows[rows["workload"] == "rate6"]
    for row in top.itertuples():
        assert row.aware_jct_s <= row.agnostic_jct_s, row.aware
        assert row.ratio >= 1.0


def test_rerun_reuses_every_cell(quick_folder: Path) -> None:
    folder = quick_folder
    cells = sorted((folder / gt.CELLS_FOLDER).glob("*.json"))
    assert len(cells) == len(gt.plan_cells(gt.quick_settings())) == 18
    before = {p: p.stat().st_mtime_ns for p in cells}
    seen: list[str] = []
    table = compute_table(gt.KIND, gt.quick_settings(), folder, on_cell=seen.append)
    assert len(seen) == 18 and all(s.endswith("(cached)") for s in seen)
    assert {p: p.stat().st_mtime_ns for p in cells} == before
    frame = _seed_rows(folder)
    mine = frame[(frame["workload"] == "trace") & (frame["aware"] == "gavel.fifo")]
    assert table.row("trace", "gavel.fifo").mean["aware_jct_s"] == pytest.approx(
        float(mine["aware_jct_s"].iloc[0]), rel=REL)


def test_first_seed_only_on_the_trace_for_finish_time_fairness() -> None:
    settings = gt.quick_settings(seeds=(0, 1, 2))
    ftf = "gavel.finish_time_fairness"
    assert settings.seeds_for("trace", ftf) == (0,)
    assert settings.seeds_for("rate2", ftf) == (0, 1, 2)
    assert settings.seeds_for("trace", "gavel.fifo") == (0, 1, 2)
    # 6 policies x 2 rates x 3 seeds + 4 policies x 3 seeds + 2 FTF policies x 1 seed
    assert len(gt.plan_cells(settings)) == 36 + 12 + 2


def test_mean_std_over_seeds_and_up_to() -> None:
    """Row statistics from hand-made cell results: mean and sample std of the ratios."""
    results = {
        ("rate1", 0, "a"): gt.CellResult("a", "rate1", 0, 100.0, 5, 0, 0.1, 0.1),
        ("rate1", 0, "b"): gt.CellResult("b", "rate1", 0, 300.0, 5, 0, 0.1, 0.1),
        ("rate1", 1, "a"): gt.CellResult("a", "rate1", 1, 200.0, 5, 0, 0.1, 0.1),
        ("rate1", 1, "b"): gt.CellResult("b", "rate1", 1, 200.0, 5, 0, 0.1, 0.1),
    }
    ratios = np.array([3.0, 1.0])
    settings = gt.TableSettings(trace=None, rates=(1.0,), seeds=(0, 1), pairs=(("P", "a", "b"),))
    table = gt.rows_from_results(settings, results)
    row = table.row("rate1", "a")
    assert row.mean["ratio"] == pytest.approx(ratios.mean(), rel=REL)
    assert row.std["ratio"] == pytest.approx(ratios.std(ddof=1), rel=REL)
    assert row.mean["aware_jct_s"] == pytest.approx(150.0, rel=REL)
    assert gt.up_to(table) == {"P": (pytest.approx(2.0, rel=REL), "rate1")}


def test_bad_settings_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        gt.check_settings(gt.quick_settings(seeds=()))
    with pytest.raises(InputError):
        gt.check_settings(gt.quick_settings(trace=str(tmp_path / "missing.json")))
    with pytest.raises(InputError):
        gt.check_settings(gt.quick_settings(rates=(0.0,)))


def test_bad_cli_flags_exit_2(tmp_path: Path) -> None:
    code = main(["tables", "gavel", "--quick", "--rates", "-1", "--out", str(tmp_path / "x")])
    assert code == 2
    assert not (tmp_path / "x").exists()
    for bad in (["--measure", "5:3"], ["--pairs", "lass"], ["--steady-state"]):
        code = main(["tables", "gavel", "--quick", *bad, "--out", str(tmp_path / "y")])
        assert code == 2, bad
        assert not (tmp_path / "y").exists()


def test_measured_window_averages_only_those_arrivals(tmp_path: Path) -> None:
    """``measure`` = (A, B) averages jobs A..B-1 in arrival order, as Gavel's ``-s/-e``: the
    cell equals the mean over exactly those jobs of a simulation run here."""
    settings = gt.TableSettings(trace=None, jobs=24, rates=(6.0,), seeds=(1,),
                                pairs=gt.PAIRS[:1], measure=(10, 20))
    table = compute_table(gt.KIND, settings, tmp_path)
    instance = generate_gavel_instance(24, CLUSTER, seed=1, jobs_per_hour=6.0,
                                       multi_gpu=False)
    for policy, side in (("gavel.max_min_fairness", "aware"),
                         ("gavel.max_min_fairness_agnostic", "agnostic")):
        frame = simulate(instance, policy=get_policy(policy), round_s=360.0,
                         seed=1).to_dataframe()
        frame = frame.sort_values("arrival", kind="stable").iloc[10:20]
        expected = float((frame["finish"] - frame["arrival"]).mean())
        assert table.row("rate6", "gavel.max_min_fairness").mean[f"{side}_jct_s"] == \
            pytest.approx(expected, rel=REL)
    # the window is part of the cell's name: the whole-run cell is another file
    whole = gt.plan_cells(gt.TableSettings(trace=None, jobs=24, rates=(6.0,), seeds=(1,),
                                           pairs=gt.PAIRS[:1]))
    windowed = gt.plan_cells(settings)
    assert {c.key for c in whole}.isdisjoint({c.key for c in windowed})
    steady = gt.steady_state_settings()
    assert steady.measure == (4000, 5000) and steady.jobs > 5000 and steady.trace is None
    with pytest.raises(InputError):
        gt.check_settings(gt.TableSettings(trace=None, jobs=24, measure=(10, 25)))


def test_shipped_spec_plans_the_cells_of_the_settings() -> None:
    """The shipped spec is the table's settings: the default document gives
    ``TableSettings()`` (68 cells), ``quick`` the cells of ``quick_settings()`` (18, by file
    name) and ``steady_state`` ``steady_state_settings()``."""
    quick = plan_experiment(shipped_experiment("gavel", variants=["quick"]))
    assert quick.settings == gt.quick_settings()
    assert sorted(c.file_name for c in quick.cells) == sorted(
        c.file_name for c in gt.plan_cells(gt.quick_settings()))
    assert len(quick.cells) == 18
    full = plan_experiment(shipped_experiment("gavel"))
    assert full.settings == gt.TableSettings()
    # the trace: 4 policies x 3 seeds + the finish-time-fairness pair x 1; 3 rates x 6 x 3
    assert len(full.cells) == 14 + 54
    steady = shipped_experiment("gavel", variants=["steady_state"])
    assert gt.settings_from_spec(steady) == gt.steady_state_settings()
    # --pairs, --trace/--no-trace, --measure, --seeds as overrides of the spec
    chosen = gt.settings_from_spec(shipped_experiment("gavel", variants=["quick"], overrides=[
        "policies=[{label: FIFO, name: gavel.fifo}]", "workloads[0].params.trace=null",
        "workloads[0].params.measure=[5, 25]", "seeds=[3, 4]"]))
    assert chosen == gt.quick_settings(pairs=gt.PAIRS[1:2], trace=None, measure=(5, 25),
                                       seeds=(3, 4))


@pytest.mark.parametrize(("override", "field"), [
    ("workloads[0].params.jobs=-1", "workloads[0].params.jobs"),
    ("workloads[0].params.job=3", "workloads[0].params.job"),
    ("workloads[0].params.rates=[2, 0]", "workloads[0].params.rates[1]"),
    ("workloads[0].params.rates=[2, 2]", "workloads[0].params.rates"),
    ("workloads[0].params.cluster.v100=1.5", "workloads[0].params.cluster.v100"),
    ("workloads[0].params.measure=[5, 3]", "workloads[0].params.measure"),
    ("workloads[0].params.measure=[0, 31]", "workloads[0].params.measure"),
    ("workloads[0].params.trace=missing.json", "workloads[0].params.trace"),
    ("workloads[0].generator=gavel.nope", "workloads[0].generator"),
    ("policies[1].name=gandiva", "policies[1].name"),
    ("policies[0].options={x: 1}", "policies[0].options"),
    ("simulator.round_s=0", "simulator.round_s"),
    ("simulator.rounds=3", "simulator.rounds"),
    ("settings.extra=1", "settings.extra"),
    ("report.reference=gavel.fifo", "report.reference"),
    ("seeds=[]", "seeds"),
])
def test_bad_spec_field_is_an_input_error_naming_it(override: str, field: str) -> None:
    spec = shipped_experiment("gavel", variants=["quick"], overrides=[override])
    with pytest.raises(InputError) as caught:
        plan_experiment(spec)
    assert caught.value.field == field, caught.value
