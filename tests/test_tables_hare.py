"""``schedlab tables hare``: the table kind, its shipped spec, its cache, the gang conversion
and the CLI.

Expected values are re-derived in the test: the weighted JCT from a solve's schedule entries
(each job's last task end), the simulated schemes from gang jobs built here from the Hare
fields, and the gang conversion of a 2-job instance by hand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import quick_cli_on_spec_cells

from schedlab import solve
from schedlab.analysis.experiments.runner import compute_table, plan_experiment, run_experiment
from schedlab.analysis.experiments.spec import shipped_experiment
from schedlab.analysis.tables import hare as ht
from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.instance import Instance, instance_from_dict
from schedlab.policies.registry import get_policy
from schedlab.simulator.engine import simulate
from schedlab.workloads.hare import generate_hare_instance

REL = 1e-9
QUICK_CLUSTER = {"k80": 10, "p100": 7, "v100": 7}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, quick_table: Path
              ) -> tuple[int, Path, str]:
    """The quick table through the command line, once for the module, on the cells of the
    shipped spec's quick variant (:func:`conftest.quick_cli_on_spec_cells`: the old command
    and the spec plan the same cells and write the same table)."""
    return quick_cli_on_spec_cells("hare", quick_table, tmp_path_factory.mktemp("quick"))


@pytest.fixture(scope="module")
def quick_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped spec's quick variant run by the experiment runner (no command line),
    once for the module: its output folder."""
    out = tmp_path_factory.mktemp("quick-spec")
    run_experiment(shipped_experiment("hare", variants=["quick"]), out)
    return out


def _seed_rows(folder: Path) -> pd.DataFrame:
    frame = pd.read_csv(folder / ht.CSV_NAME)
    return frame[frame["stat"] == "seed"]


def test_quick_cli_writes_markdown_csv_and_pngs(quick_run: tuple[int, Path, str]) -> None:
    code, folder, out = quick_run
    assert code == 0
    names = (ht.MARKDOWN_NAME, ht.CSV_NAME, ht.JOBS_PLOT_NAME, ht.GPUS_PLOT_NAME,
             ht.CDF_PLOT_NAME)
    for name in names:
        assert (folder / name).is_file(), name
    for name in names[2:]:
        assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (folder / ht.MARKDOWN_NAME).read_text()
    assert markdown == out.split("wrote ")[0]
    for label, _, _, _ in ht.SCHEMES:
        assert sum(ln.startswith(f"| {label} |") for ln in markdown.splitlines()) == 2
    seeds = _seed_rows(folder)
    # workloads: (8, 24), (16, 20), (16, 24); six schemes each
    assert sorted({(int(n), int(g)) for n, g in zip(seeds["jobs"], seeds["gpus"],
                                                    strict=True)}) == [(8, 24), (16, 20),
                                                                       (16, 24)]
    assert len(seeds) == 3 * len(ht.SCHEMES)
    assert seeds["weighted_jct_s"].notna().all()
    assert len(list((folder / ht.CELLS_FOLDER).glob("*.json"))) == 3 * len(ht.SCHEMES)

def test_quick_cli_writes_latex_and_a_manifest(quick_run: tuple[int, Path, str],
                                              assert_table_files: Callable[..., None]) -> None:
    """The same rows as LaTeX; a manifest with the command, seeds and each file's sha256."""
    _, folder, _ = quick_run
    assert_table_files(ht, folder, "hare", [0])



def _weighted_jct_of_schedule(instance: Instance, formulation: str) -> float:
    """sum_j w_j (C_j - r_j) with C_j = the latest end of j's schedule entries."""
    solution = solve(instance, formulation)
    last: dict[str, float] = {}
    for entry in solution.schedule:
        last[entry.job] = max(last.get(entry.job, 0.0), entry.end)
    return sum(job.weight * (last[job.id] - job.arrival) for job in instance.jobs)


def test_offline_cells_rederive_from_their_schedules(quick_table: Path) -> None:
    folder = quick_table
    seeds = _seed_rows(folder)
    instance = generate_hare_instance(16, seed=0, cluster=QUICK_CLUSTER)
    for scheme in ("hare.greedy", "hare.sched_allox"):
        row = seeds[(seeds["scheme"] == scheme) & (seeds["jobs"] == 16)
                    & (seeds["gpus"] == 24)].iloc[0]
        expected = _weighted_jct_of_schedule(instance, scheme)
        assert row["weighted_jct_s"] == pytest.approx(expected, rel=REL), scheme


def _gangs_here(instance: Instance, round_s: float) -> Instance:
    """Gang jobs built in the test from the Hare fields (the documented conversion)."""
    counts = {k: pool.count for k, pool in instance.cluster.accelerators.items()}
    jobs = []
    for job in instance.jobs:
        assert job.task_seconds is not None and job.tasks_per_round is not None
        throughput = {}
        for k, n in counts.items():
            p = job.task_seconds.get(k)
            throughput[k] = 1.0 / p if p is not None and n >= job.tasks_per_round else 0.0
        jobs.append({"id": job.id, "arrival": job.arrival, "weight": job.weight,
                     "scale_factor": job.tasks_per_round, "total_steps": float(job.rounds),
                     "throughput": throughput,
                     "switch_overhead_s": max(job.switch_seconds_on(k) for k in counts)})
    return instance_from_dict({"name": "gangs", "params": {"round_s": round_s},
                               "cluster": {"accelerators": {k: {"count": n}
                                                            for k, n in counts.items()}},
                               "jobs": jobs})


def test_simulated_cells_rederive_from_gang_simulations(
        quick_table: Path) -> None:
    folder = quick_table
    seeds = _seed_rows(folder)
    instance = generate_hare_instance(8, seed=0, cluster=QUICK_CLUSTER)
    gangs = _gangs_here(instance, 60.0)
    for scheme in ("tiresias", "gavel.max_min_fairness"):
        records = simulate(gangs, policy=get_policy(scheme), seed=0).jobs
        expected = sum(r.weight * (r.finish - r.arrival) for r in records)  # type: ignore
        row = seeds[(seeds["scheme"] == scheme) & (seeds["jobs"] == 8)].iloc[0]
        assert row["weighted_jct_s"] == pytest.approx(expected, rel=REL), scheme


def test_online_las_row_is_heterogeneity_aware_tiresias_on_the_gangs(
        quick_table: Path) -> None:
    """The 'Online LAS (heterogeneity-aware)' row = a simulation, run here, of the Tiresias
    class built with heterogeneity_aware=True (not through the registered name) on the gangs
    built here; and it differs from the type-blind Tiresias row on this workload."""
    from schedlab.policies.tiresias import Tiresias

    seeds = _seed_rows(quick_table)
    assert ("Online LAS (heterogeneity-aware)", "online", "tiresias_aware", {}) in ht.SCHEMES
    for jobs, gpus in ((8, 24), (16, 20)):
        cluster = ht.scaled_cluster(QUICK_CLUSTER, gpus) if gpus != 24 else QUICK_CLUSTER
        gangs = _gangs_here(generate_hare_instance(jobs, seed=0, cluster=cluster), 60.0)
        records = simulate(gangs, policy=Tiresias(heterogeneity_aware=True), seed=0).jobs
        assert all(r.finish is not None for r in records)
        expected = sum(r.weight * (r.finish - r.arrival) for r in records)  # type: ignore
        here = seeds[(seeds["jobs"] == jobs) & (seeds["gpus"] == gpus)]
        row = here[here["scheme"] == "tiresias_aware"]
        assert len(row) == 1
        assert row.iloc[0]["label"] == "Online LAS (heterogeneity-aware)"
        assert row.iloc[0]["weighted_jct_s"] == pytest.approx(expected, rel=REL)
    blind = seeds[(seeds["scheme"] == "tiresias") & (seeds["jobs"] == 8)].iloc[0]
    aware = seeds[(seeds["scheme"] == "tiresias_aware") & (seeds["jobs"] == 8)].iloc[0]
    assert aware["weighted_jct_s"] != pytest.approx(blind["weighted_jct_s"], rel=1e-6)


def test_reductions_are_one_minus_hare_over_scheme(quick_table: Path) -> None:
    folder = quick_table
    seeds = _seed_rows(folder)
    for (_, _), here in seeds.groupby(["jobs", "gpus"]):
        hare = here[here["scheme"] == "hare.greedy"].iloc[0]["weighted_jct_s"]
        for _, row in here.iterrows():
            assert row["hare_reduction"] == pytest.approx(1 - hare / row["weighted_jct_s"],
                                                          rel=1e-12, abs=1e-12)


TWO_JOBS: dict[str, Any] = {
    "name": "two",
    "cluster": {"accelerators": {"v100": {"count": 2}, "k80": {"count": 4}}},
    "jobs": [
        {"id": "a", "weight": 2.0, "arrival": 5.0, "rounds": 3, "tasks_per_round": 2,
         "task_seconds": {"v100": 4.0, "k80": 10.0},
         "switch_seconds": {"v100": 0.5, "k80": 1.5}},
        {"id": "b", "weight": 1.0, "rounds": 1, "tasks_per_round": 4,
         "task_seconds": {"v100": 2.0, "k80": 8.0}, "switch_seconds": 0.25},
    ],
}


def test_gang_conversion_of_two_jobs_by_hand() -> None:
    gangs = ht.gang_instance(instance_from_dict(TWO_JOBS), round_s=30.0)
    assert gangs.params.round_s == 30.0
    assert {k: p.count for k, p in gangs.cluster.accelerators.items()} == {"v100": 2, "k80": 4}
    a, b = gangs.jobs
    # a: a gang of 2 fits both types; 3 rounds at 1/4 and 1/10 rounds/s
    assert (a.id, a.scale_factor, a.total_steps, a.weight, a.arrival) == ("a", 2, 3.0, 2.0, 5.0)
    assert a.throughput == pytest.approx({"v100": 0.25, "k80": 0.1}, rel=REL)
    assert a.switch_overhead_s == pytest.approx(1.5, rel=REL)
    # b: a gang of 4 does not fit 2 V100s, so only the K80s (1/8 rounds/s)
    assert (b.id, b.scale_factor, b.total_steps, b.weight, b.arrival) == ("b", 4, 1.0, 1.0, 0.0)
    assert b.throughput == pytest.approx({"v100": 0.0, "k80": 0.125}, rel=REL)
    assert b.switch_overhead_s == pytest.approx(0.25, rel=REL)


def test_gang_that_fits_no_type_is_rejected() -> None:
    spec = {**TWO_JOBS, "cluster": {"accelerators": {"v100": {"count": 2},
                                                     "k80": {"count": 3}}}}
    with pytest.raises(InputError, match="job b"):
        ht.gang_instance(instance_from_dict(spec), round_s=60.0)


def test_cached_cells_are_reused_without_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []
    real = ht.run_scheme

    def counting(cell: ht.Cell) -> ht.CellResult:
        calls.append((cell.scheme, cell.jobs))
        return real(cell)

    monkeypatch.setattr(ht, "run_scheme", counting)
    settings = replace(ht.quick_settings(), jobs=(8,), sweep_jobs=8, gpus=(24,),
                       schemes=ht.SCHEMES[1:3] + ht.SCHEMES[4:5])
    first = compute_table(ht.KIND, settings, tmp_path)
    assert sorted(calls) == [("hare.sched_allox", 8), ("hare.sched_homo", 8), ("tiresias", 8)]
    calls.clear()
    again = compute_table(ht.KIND, settings, tmp_path)
    assert calls == []
    for old, new in zip(first.rows, again.rows, strict=True):
        assert new.mean["weighted_jct_s"] == pytest.approx(old.mean["weighted_jct_s"], rel=REL)


def test_shipped_spec_is_the_table_and_its_quick_variant_the_quick_table() -> None:
    """The default document is TableSettings(), with the old cells_count's cells; `quick`
    expands to exactly the cells of quick_settings()."""
    full = plan_experiment(shipped_experiment("hare"))
    assert full.settings == ht.TableSettings()
    assert len(full.cells) == (len(full.settings.workloads()) * len(full.settings.seeds)
                               * len(full.settings.schemes)) == 126
    quick = plan_experiment(shipped_experiment("hare", variants=["quick"]))
    assert quick.settings == ht.quick_settings()
    expected = sorted(cell.file_name for cell in ht.plan_cells(ht.quick_settings()))
    assert sorted(cell.file_name for cell in quick.cells) == expected and len(expected) == 18


@pytest.mark.parametrize(("override", "field"), [
    ("workloads[0].params.jobs=[8, 0]", "workloads[0].params.jobs[1]"),
    ("workloads[0].params.jobs=8", "workloads[0].params.jobs"),
    ("workloads[0].params.sweep_jobs=1.5", "workloads[0].params.sweep_jobs"),
    ("workloads[0].params.gpus=[20, 4]", "workloads[0].params.gpus[1]"),
    ("workloads[0].params.cluster={k80: 4, v100: 4}", "workloads[0].params.cluster"),
    ("workloads[0].params.cluster={k80: -1, v100: 8}", "workloads[0].params.cluster.k80"),
    ("workloads[0].params.density=1", "workloads[0].params.density"),
    ("simulator.round_s=0", "simulator.round_s"),
    ("simulator.lp_eps=0.5", "simulator.lp_eps"),
    ("settings.lp_eps=-1", "settings.lp_eps"),
    ("policies[3].name=no_such_policy", "policies[3].name"),
    ("policies[3].name=tiresias", "policies[4].name"),  # the second tiresias
    ("policies[0].options={eps: 0.5}", "policies[0].options.eps"),
    ("report.reference=tiresias", "report.reference"),
    ("seeds=[]", "seeds"),
])
def test_a_bad_spec_field_is_one_input_error_naming_its_path(override: str, field: str
                                                             ) -> None:
    spec = shipped_experiment("hare", overrides=[override], variants=["quick"])
    with pytest.raises(InputError) as caught:
        plan_experiment(spec)
    assert caught.value.field == field, str(caught.value)


def test_spec_round_and_lp_grid_are_the_settings_and_in_the_cell_keys() -> None:
    """What --round-s and --lp-eps become: simulator.round_s and settings.lp_eps."""
    spec = shipped_experiment("hare", variants=["quick"],
                              overrides=["simulator.round_s=30", "settings.lp_eps=0.5",
                                         "seeds=[3, 4]"])
    settings = ht.settings_from_spec(spec)
    assert settings == replace(ht.quick_settings(), round_s=30.0, lp_eps=0.5, seeds=(3, 4))
    greedy = next(c for c in ht.plan_cells(settings) if c.scheme == "hare.greedy")
    assert greedy.kwargs == {"eps": 0.5} and greedy.round_s == 30.0


@pytest.mark.parametrize(("args", "field"), [
    (["--seeds", "0"], "--seeds"),
    (["--round-s", "-1"], "--round-s"),
    (["--lp-eps", "zero"], "--lp-eps"),
])
def test_cli_bad_arguments_exit_2_with_one_line(
        args: list[str], field: str, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    code = main(["tables", "hare", "--quick", "--out", str(tmp_path), *args])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("error:") and err.count("\n") == 1 and field in err


def test_cli_out_must_be_a_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x")
    code = main(["tables", "hare", "--quick", "--out", str(target)])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "--out" in err


def test_claim_lower_weighted_jct_than_online_schemes_holds(
        quick_table: Path) -> None:
    """Hare's claim, in direction: a lower total weighted JCT than Gavel, Tiresias, the
    heterogeneity-aware online LAS and Sched_Homo on every quick workload."""
    folder = quick_table
    frame = _seed_rows(folder)
    for (jobs, gpus), rows in frame.groupby(["jobs", "gpus"]):
        wjct = rows.set_index("label")["weighted_jct_s"]
        for scheme in ("Gavel (max-min fairness)", "Tiresias",
                       "Online LAS (heterogeneity-aware)", "Sched_Homo"):
            assert wjct["Hare"] < wjct[scheme], (jobs, gpus, scheme)


@pytest.mark.xfail(strict=True, reason="not reproduced everywhere: the paper has Hare ahead of "
                   "Sched_Allox on every workload; on the quick 8-job workload Sched_Allox's "
                   "list schedule is 17% better, on the full table's 100 jobs 4% better "
                   "(docs/reproduction.md, Hare)")
def test_claim_ahead_of_sched_allox_everywhere_is_not_reproduced(
        quick_table: Path) -> None:
    folder = quick_table
    frame = _seed_rows(folder)
    for (jobs, gpus), rows in frame.groupby(["jobs", "gpus"]):
        wjct = rows.set_index("label")["weighted_jct_s"]
        assert wjct["Hare"] < wjct["Sched_Allox"], (jobs, gpus)
