"""``schedlab tables cross``: every policy on the same four workloads.

One quick table (6 jobs per workload, 1 seed, every registered policy and Hare's planner:
the shipped spec's ``quick`` variant) is computed once for the module; the checks read it and
compare cells with simulations and plans made here, independently of the table's code path.
One worker (cells in this process): a process pool forked from a test process that has
already run HiGHS can spin forever in HiGHS' thread pool.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from schedlab.analysis import cross_workloads as cw
from schedlab.analysis.experiments.runner import (
    compute_table,
    plan_experiment,
    run_experiment,
)
from schedlab.analysis.experiments.spec import shipped_experiment
from schedlab.analysis.tables import cross as ct
from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.policies.registry import get_policy, policies
from schedlab.registry import get_formulation
from schedlab.simulator.elastic import simulate_elastic
from schedlab.simulator.elastic_gangs import FixedGangs
from schedlab.simulator.engine import simulate
from schedlab.workloads.gavel import generate_gavel_instance
from schedlab.workloads.shockwave import generate_shockwave_instance


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ct.CrossTable]:
    out = tmp_path_factory.mktemp("cross")
    spec = shipped_experiment("cross", variants=["quick"], overrides=["run.workers=1"])
    assert run_experiment(spec, out).exit_code == 0
    seen: list[str] = []
    table = compute_table(ct.KIND, ct.quick_settings(), out, on_cell=seen.append)
    assert seen and all(s.endswith("(cached)") for s in seen)  # every cell read back
    return out, table


def test_every_policy_on_every_workload_has_values_or_a_reason(
        quick: tuple[Path, ct.CrossTable]) -> None:
    out, table = quick
    expected = {*policies(), "hare.greedy"}
    assert "goodput" not in ct.quick_settings().workloads
    for workload in ct.quick_settings().workloads:
        rows = table.at(workload)
        assert {r.policy for r in rows} == expected
        for row in rows:
            if row.ran:
                assert all(math.isfinite(row.mean[k]) for k, *_ in ct.COLUMNS), row
            else:
                assert row.reason.strip(), row
    # Where a policy cannot run is known in advance: Shockwave off one type / off epochs.
    assert not table.row("heterogeneous", "shockwave").ran
    assert not table.row("fine-tuning", "shockwave_convex").ran
    assert table.row("homogeneous", "shockwave").ran
    assert table.row("fine-tuning", "titan").ran
    # Gavel's FIFO as its code runs over-commits GPUs: only Gavel's round mechanism runs it.
    assert not table.row("fine-tuning", "gavel.fifo_agnostic_quirks").ran
    assert "round mechanism" in table.row("fine-tuning", "gavel.fifo_agnostic_quirks").reason
    assert table.row("heterogeneous", "gavel.fifo_agnostic_quirks").ran
    markdown = (out / "cross.md").read_text()
    assert markdown.count("n/a: Shockwave plans one accelerator type") == 2
    for name in ("cross.csv", "cross.tex", "cross_heatmap.png", "cross.manifest.json"):
        assert (out / name).stat().st_size > 0
    manifest = json.loads((out / "cross.manifest.json").read_text())
    assert {f["name"] for f in manifest["files"]} == {
        "cross.md", "cross.csv", "cross.tex", "cross_heatmap.png"}


def test_utilization_in_unit_interval_and_p95_at_least_median(
        quick: tuple[Path, ct.CrossTable]) -> None:
    _, table = quick
    ran = [r for r in table.rows if r.ran]
    assert len(ran) > 100
    for row in ran:
        for values in row.per_seed.values():
            assert 0.0 < values["utilization"] <= 1.0 + 1e-9, row.policy
            assert values["p95_jct_s"] >= values["median_jct_s"] - 1e-9
            assert 0.0 <= values["unfair_fraction"] <= 1.0


def _jcts(finish: dict[str, float], arrival: dict[str, float]) -> np.ndarray:
    return np.array([finish[j] - arrival[j] for j in sorted(finish)])


def test_homogeneous_cell_equals_a_direct_simulation(
        quick: tuple[Path, ct.CrossTable]) -> None:
    _, table = quick
    cfg = table.settings
    # The workload built here from the generator, not by the table's code.
    instance = generate_gavel_instance(cfg.jobs, {"v100": cfg.gpus}, 0,
                                       jobs_per_hour=cfg.jobs_per_hour)
    round_s = ct.QUICK_ROUND_S["homogeneous"]
    result = simulate(instance, policy=get_policy("srtf"), seed=0, round_s=round_s)
    arrival = {r.job: r.arrival for r in result.jobs}
    finish = {r.job: float(r.finish) for r in result.jobs}  # type: ignore[arg-type]
    jct = _jcts(finish, arrival)
    row = table.row("homogeneous", "srtf")
    assert row.mean["avg_jct_s"] == pytest.approx(jct.mean(), rel=1e-9)
    assert row.mean["p95_jct_s"] == pytest.approx(np.percentile(jct, 95), rel=1e-9)
    span = max(finish.values()) - min(arrival.values())
    assert row.mean["makespan_s"] == pytest.approx(span, rel=1e-9)
    busy = sum(result.busy_gpu_seconds().values())
    assert row.mean["utilization"] == pytest.approx(busy / (cfg.gpus * span), rel=1e-9)


def test_fine_tuning_cell_equals_a_direct_elastic_simulation(
        quick: tuple[Path, ct.CrossTable]) -> None:
    _, table = quick
    cfg = table.settings
    instance = ct.workload_instance(cfg, "fine-tuning", 0)
    assert instance.params.round_s == ct.QUICK_ROUND_S["fine-tuning"]
    result = simulate_elastic(instance, FixedGangs(get_policy("fifo")), seed=0)
    jct = np.array([float(r.finish) - r.arrival for r in result.jobs])  # type: ignore[arg-type]
    row = table.row("fine-tuning", "fifo")
    assert row.mean["avg_jct_s"] == pytest.approx(jct.mean(), rel=1e-9)


def test_hare_cell_equals_a_direct_plan(quick: tuple[Path, ct.CrossTable]) -> None:
    _, table = quick
    cfg = table.settings
    instance = ct.workload_instance(cfg, "heterogeneous", 0)
    solution = get_formulation("hare.greedy", eps=cfg.lp_eps).solve(cw.as_hare(instance))
    done = solution.metrics["completion_s"]
    jct = np.array([done[j.id] - j.arrival for j in instance.jobs])
    assert table.row("heterogeneous", "hare.greedy").mean["avg_jct_s"] == pytest.approx(
        jct.mean(), rel=1e-9)


def test_constant_batch_conversion_keeps_every_jobs_work() -> None:
    """A policy blind to batch sizes runs the converted jobs exactly as the static ones."""
    instance = generate_gavel_instance(5, {"v100": 3}, 4, jobs_per_hour=4.0)
    converted = cw.as_dynamic(instance)
    for job, dyn in zip(instance.jobs, converted.jobs, strict=True):
        assert dyn.batch_schedule is not None and dyn.regimes is not None
        assert len(set(dyn.batch_schedule)) == 1
        alone = job.total_steps / max(job.throughput.values())  # type: ignore[operator]
        assert sum(dyn.regimes[str(b)] for b in dyn.batch_schedule) == pytest.approx(
            alone, rel=1e-9)
    plain = simulate(instance, policy=get_policy("fifo"), seed=0, round_s=360.0)
    as_epochs = simulate(converted, policy=get_policy("fifo"), seed=0, round_s=360.0)
    assert as_epochs.average_jct() == pytest.approx(plain.average_jct(), rel=1e-6)


def test_hare_conversion_rounds_and_task_seconds() -> None:
    instance = generate_shockwave_instance(4, {"v100": 4}, 1)
    hare = cw.as_hare(instance, max_rounds=3)
    for job, converted in zip(instance.jobs, hare.jobs, strict=True):
        alone = sum(job.regimes[str(b)] for b in job.batch_schedule)  # type: ignore[index]
        expected_rounds = min(3, max(1, math.ceil(alone / instance.params.round_s)))
        assert converted.rounds == expected_rounds
        assert converted.tasks_per_round == job.scale_factor
        assert converted.rounds * converted.task_seconds["v100"] == pytest.approx(  # type: ignore[index]
            alone, rel=1e-9)


def test_unit_price_only_where_missing() -> None:
    gavel = generate_gavel_instance(2, {"v100": 2}, 0)
    assert cw.with_unit_price(gavel) is gavel
    titan = cw.build_workload("fine-tuning", jobs=2, seed=0, gpus=8, heterogeneous={},
                              jobs_per_hour=1.0)
    priced = cw.with_unit_price(titan)
    assert priced.cluster.accelerators["a100"].cost_per_hour == cw.UNIT_PRICE_PER_HOUR
    assert [j.id for j in priced.jobs] == [j.id for j in titan.jobs]


def test_bad_settings_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tables", "cross", "--quick", "--out", str(tmp_path / "x"), "--jobs",
                 "0"]) == 2
    assert capsys.readouterr().err.count("error:") == 1
    assert not (tmp_path / "x").exists()


def test_quick_cli_reuses_the_cells_and_writes_the_same_table(
        quick: tuple[Path, ct.CrossTable], tmp_path: Path) -> None:
    """``tables cross --quick`` into a folder holding the quick spec's cells runs none again
    and writes the same Markdown."""
    out, _ = quick
    shutil.copytree(out / ct.CELLS_FOLDER, tmp_path / ct.CELLS_FOLDER)
    code = main(["tables", "cross", "--quick", "--quiet", "--out", str(tmp_path), "--workers",
                 "1"])
    assert code == 0
    assert (tmp_path / "cross.md").read_text() == (out / "cross.md").read_text()


def test_shipped_spec_plans_the_cells_of_the_settings() -> None:
    """The shipped spec is the table's settings: ``quick`` gives the cells of
    ``quick_settings()`` (by file name), the default document ``TableSettings()`` (every
    registered policy and Hare's planner on 4 workloads x 3 seeds)."""
    quick = plan_experiment(shipped_experiment("cross", variants=["quick"]))
    everyone = ct.registered_policies()
    assert quick.settings == ct.quick_settings(policies=everyone)
    assert sorted(c.file_name for c in quick.cells) == sorted(
        c.file_name for c in ct.plan_cells(ct.quick_settings()))
    assert len(quick.cells) == 4 * len(everyone)
    full = shipped_experiment("cross")
    assert ct.settings_from_spec(full) == ct.TableSettings(policies=everyone)
    jobs = ct.settings_from_spec(shipped_experiment(
        "cross", variants=["quick"], overrides=["workloads[0].params.jobs=9", "seeds=[2, 3]",
                                                "policies=[{name: fifo}, {name: hare.greedy}]"]))
    assert jobs == ct.quick_settings(jobs=9, seeds=(2, 3), policies=("fifo", "hare.greedy"))


@pytest.mark.parametrize(("override", "field"), [
    ("workloads[0].params.jobs=-1", "workloads[0].params.jobs"),
    ("workloads[0].params.jobz=3", "workloads[0].params.jobz"),
    ("workloads[0].params.titan_gpus=6", "workloads[0].params.titan_gpus"),
    ("workloads[0].params.heterogeneous.k80=0", "workloads[0].params.heterogeneous.k80"),
    ("workloads[0].params.jobs_per_hour=0", "workloads[0].params.jobs_per_hour"),
    ("workloads[0].params.workloads=[homogeneous, nope]", "workloads[0].params.workloads[1]"),
    ("workloads[0].params.workloads=[dynamic, dynamic]", "workloads[0].params.workloads"),
    ("simulator.round_s.dynamic=-5", "simulator.round_s.dynamic"),
    ("simulator.round_s.other=5", "simulator.round_s.other"),
    ("settings.lp_eps=0", "settings.lp_eps"),
    ("settings.hare_max_rounds=1.5", "settings.hare_max_rounds"),
    ("settings.eps=1", "settings.eps"),
    ("policies=[{name: nope}]", "policies[0].name"),
    ("policies=[{name: fifo, options: {x: 1}}]", "policies[0].options"),
    ("policies=[{name: fifo}, {name: fifo}]", "policies"),
    ("report.reference=fifo", "report.reference"),
])
def test_bad_spec_field_is_an_input_error_naming_it(override: str, field: str) -> None:
    spec = shipped_experiment("cross", variants=["quick"], overrides=[override])
    with pytest.raises(InputError) as caught:
        plan_experiment(spec)
    assert caught.value.field == field, caught.value


def test_the_goodput_column_runs_fixed_gangs_and_sia_and_says_why_others_cannot(
        tmp_path: Path) -> None:
    settings = ct.quick_settings(workloads=("homogeneous", "goodput"), jobs=2,
                                 policies=("fifo", "sia", "shockwave", "hare.greedy"))
    table = compute_table(ct.KIND, settings, tmp_path)
    fifo, sia = table.row("goodput", "fifo"), table.row("goodput", "sia")
    assert fifo.ran and sia.ran
    for row in (fifo, sia):
        assert all(math.isfinite(row.mean[k]) for k, *_ in ct.COLUMNS), row
    # a job alone on its request is never slower than beside others under FIFO: rho >= ~1
    assert fifo.mean["worst_rho"] >= 1.0 - 1e-9
    assert "TunedJobs" in fifo.plan.conversion
    assert not table.row("goodput", "shockwave").ran
    assert not table.row("goodput", "hare.greedy").ran
    assert not table.row("homogeneous", "sia").ran
    assert "goodput jobs only" in table.row("homogeneous", "sia").reason
