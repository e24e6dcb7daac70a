"""Switch costs on real PyTorch: every kind runs, the in-process switches resume the job
exactly, and the mean/CI arithmetic is the Student-t interval computed by hand."""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from schedlab.errors import InputError  # noqa: E402
from schedlab.profiler import switching  # noqa: E402
from schedlab.profiler.checkpoint import list_checkpoints  # noqa: E402
from schedlab.profiler.matrix import (  # noqa: E402
    SWITCH_KINDS,
    Measurement,
    SwitchMeasurement,
    ThroughputFile,
)
from schedlab.profiler.switch_costs import hare_switch_from_profile  # noqa: E402
from schedlab.profiler.switch_table import (  # noqa: E402
    add_table_command,
    render_markdown,
    switch_table,
)
from schedlab.profiler.switching import (  # noqa: E402
    JOB_SEED,
    SwitchFiles,
    load_units,
    mean_ci,
    measure_switch,
    measure_switches,
    prepare_switch_files,
    previous_job,
    split_state,
    switch_pipelined,
    switch_resident,
    switch_warm,
)
from schedlab.profiler.zoo import JobSpec, TrainingJob, build_model  # noqa: E402
from schedlab.simulator.switch import SwitchCost as TitanCost  # noqa: E402
from schedlab.simulator.switch import SwitchModel as TitanSwitchModel  # noqa: E402
from schedlab.simulator.switch import titan_switch_from_profile  # noqa: E402
from schedlab.world.hare_switching import SwitchContext  # noqa: E402
from schedlab.world.hare_switching import switch_model as hare_switch_model  # noqa: E402

SPEC = JobSpec("recommender", "tiny", 4)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("switches")


@pytest.fixture(scope="module")
def measured(workdir: Path) -> dict[str, SwitchMeasurement]:
    """All four kinds of one tiny job, 2 timed repeats, no warm-up (one worker + 2 spawns)."""
    cells = measure_switches(SPEC, "cpu", "cpu", SWITCH_KINDS, repeats=2, workdir=workdir,
                             warmup=0)
    return {cell.switch: cell for cell in cells}


@pytest.mark.parametrize("kind", SWITCH_KINDS)
def test_each_kind_gives_a_positive_mean_with_its_interval(
        measured: dict[str, SwitchMeasurement], kind: str) -> None:
    cell = measured[kind]
    assert cell.status == "ok", cell.reason
    assert cell.job == "recommender/tiny@4" and cell.device == "cpu" and cell.backend == "cpu"
    assert cell.switch == kind and cell.repeats == 2
    assert cell.seconds is not None and cell.seconds > 0
    assert cell.seconds_ci is not None
    low, high = cell.seconds_ci
    assert low <= cell.seconds <= high
    assert cell.key == f"switch:recommender/tiny@4:cpu:{kind}"


def test_checkpoint_bytes_is_the_checkpoint_file_size(
        measured: dict[str, SwitchMeasurement], workdir: Path) -> None:
    files = [path for folder in workdir.rglob("checkpoint")
             for _, path in list_checkpoints(folder)]
    assert len(files) == 1
    assert {measured[k].checkpoint_bytes for k in SWITCH_KINDS} == {files[0].stat().st_size}


def test_resident_is_cheaper_than_cold(measured: dict[str, SwitchMeasurement]) -> None:
    """Physical: a cold switch also starts a process and imports torch."""
    resident, cold = measured["resident"].seconds, measured["cold"].seconds
    assert resident is not None and cold is not None
    assert resident < cold


def test_measure_switch_one_kind(tmp_path: Path) -> None:
    cell = measure_switch(JobSpec("lstm", "tiny", 2), "cpu0", "cpu", "warm", repeats=2,
                          workdir=tmp_path, warmup=0)
    assert cell.status == "ok" and cell.switch == "warm" and cell.device == "cpu0"
    assert cell.repeats == 2 and cell.seconds is not None and cell.seconds > 0


def test_bad_arguments_raise_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown switch kind"):
        measure_switch(SPEC, "cpu", "cpu", "lukewarm", workdir=tmp_path)
    with pytest.raises(InputError, match="backend"):
        measure_switch(SPEC, "cpu", "tpu", "warm", workdir=tmp_path)
    with pytest.raises(InputError, match="repeats"):
        measure_switch(SPEC, "cpu", "cpu", "warm", repeats=0, workdir=tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_backend_without_cuda_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no CUDA device"):
        measure_switch(SPEC, "h100", "cuda", "warm", workdir=tmp_path)


# ------------------------------------------------------------ the switches in process


def _reference_after(spec: JobSpec, steps: int) -> TrainingJob:
    """An uninterrupted run of ``steps`` steps with the switch's seed."""
    with torch.random.fork_rng(devices=[]):
        job = TrainingJob(spec, seed=JOB_SEED)
        for _ in range(steps):
            job.step()
    return job


def _close(a: TrainingJob, b: TrainingJob) -> bool:
    left, right = a.model.state_dict(), b.model.state_dict()
    return left.keys() == right.keys() and all(
        torch.allclose(left[k].float(), right[k].float(), rtol=1e-9, atol=0.0) for k in left)


@pytest.mark.parametrize("model", ["gpt", "resnet18", "transformer"])
def test_pipelined_switch_resumes_the_job(model: str, tmp_path: Path) -> None:
    """The checkpoint is taken after step 1; the switch's first step is step 2, so the
    parameters equal those of an uninterrupted 2-step run (weights really loaded, unit by
    unit, and the optimizer state too)."""
    spec = JobSpec(model, "tiny", 2)
    files = prepare_switch_files(spec, tmp_path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(99)  # the switch builds with JOB_SEED anyway; the weights must load
        job = switch_pipelined(spec, files, "cpu")
    assert job.steps_done == 2
    assert _close(job, _reference_after(spec, 2))
    assert not _close(job, _reference_after(spec, 1))  # the comparison can fail


def test_warm_and_resident_switches_resume_the_job(tmp_path: Path) -> None:
    spec = JobSpec("lstm", "tiny", 2)
    files = prepare_switch_files(spec, tmp_path)
    with torch.random.fork_rng(devices=[]):
        warm = switch_warm(spec, files, "cpu")
    assert warm.steps_done == 2 and _close(warm, _reference_after(spec, 2))
    # resident: the model's parameters are current (those after step 1); the optimizer
    # state (momentum after step 1) is swapped in from its own file
    resident = _reference_after(spec, 1)
    resident.optimizer = torch.optim.SGD(resident.model.parameters(), lr=0.01, momentum=0.9)
    resident.steps_done = 0
    with torch.random.fork_rng(devices=[]):
        switch_resident(resident, files, "cpu")
    assert resident.steps_done == 2 and _close(resident, _reference_after(spec, 2))


def test_load_units_expand_module_lists_in_forward_order() -> None:
    model = build_model(JobSpec("gpt", "tiny", 1))  # 2 layers
    assert [name for name, _ in load_units(model)] == [
        "embedding", "blocks.0", "blocks.1", "norm", "output"]
    resnet = build_model(JobSpec("resnet18", "tiny", 1))
    assert [name for name, _ in load_units(resnet)] == ["0", "1", "2", "3", "4", "5"]


def test_split_state_by_unit_prefix() -> None:
    state = {"position": 1, "blocks.0.w": 2, "blocks.1.w": 3, "blocks.10.w": 4, "norm.b": 5}
    parts = split_state(state, ["blocks.0", "blocks.1", "blocks.10", "norm"])
    assert parts == [{"position": 1}, {"w": 2}, {"w": 3}, {"w": 4}, {"b": 5}]


def test_previous_job_is_another_model_of_the_same_size() -> None:
    assert previous_job(JobSpec("resnet18", "small", 8)) == JobSpec("resnet50", "small", 8)
    assert previous_job(JobSpec("gpt", "tiny", 2)) == JobSpec("resnet18", "tiny", 2)


def test_mean_ci_is_the_student_t_interval() -> None:
    # samples 1, 2, 3: mean 2, sd 1; t quantile with 2 degrees of freedom in closed form,
    # t_p = (2p - 1) / sqrt(2 p (1 - p)), p = 0.975
    p = 0.975
    t_quantile = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    mean, ci = mean_ci([1.0, 2.0, 3.0])
    assert mean == pytest.approx(2.0, rel=1e-12)
    assert ci is not None
    half = t_quantile / math.sqrt(3)
    assert ci[0] == pytest.approx(2.0 - half, rel=1e-9)
    assert ci[1] == pytest.approx(2.0 + half, rel=1e-9)
    assert mean_ci([4.0]) == (4.0, None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_switches(tmp_path: Path) -> None:
    cells = measure_switches(SPEC, "gpu", "cuda", SWITCH_KINDS, repeats=2, workdir=tmp_path,
                             warmup=1)
    for cell in cells:
        assert cell.status == "ok", cell.reason
        assert cell.backend == "cuda" and cell.seconds is not None and cell.seconds > 0
    by_kind = {cell.switch: cell.seconds for cell in cells}
    assert by_kind["resident"] < by_kind["cold"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_pipelined_switch_resumes_the_job(tmp_path: Path) -> None:
    spec = JobSpec("gpt", "tiny", 2)
    files = prepare_switch_files(spec, tmp_path)
    job = switch_pipelined(spec, files, "cuda")
    reference = switch_warm(spec, files, "cuda")
    left, right = job.model.state_dict(), reference.model.state_dict()
    assert all(torch.allclose(left[k].float(), right[k].float(), rtol=1e-6, atol=1e-7)
               for k in left)


# ------------------------------------------------- the table, Titan and Hare read it


def _switch(job: str, kind: str, seconds: float | None, device: str = "cpu",
            status: str = "ok") -> SwitchMeasurement:
    return SwitchMeasurement(job=job, device=device, switch=kind, seconds=seconds,  # type: ignore[arg-type]
                             status=status, repeats=3)  # type: ignore[arg-type]


def _hand_file() -> ThroughputFile:
    """Two jobs; gpt's warm cell missing and its resident cell an error."""
    data = ThroughputFile()
    for kind, seconds in {"cold": 2.5, "pipelined": 0.25, "warm": 0.5, "resident": 0.125}.items():
        data.upsert(_switch("resnet18/tiny@8", kind, seconds))
    data.upsert(_switch("gpt/small@8", "cold", 3.0))
    data.upsert(_switch("gpt/small@8", "pipelined", 0.75))
    data.upsert(_switch("gpt/small@8", "resident", None, status="error"))
    data.upsert(Measurement(job="gpt/small@8", device="cpu", steps_per_s=10.0))
    return data


def test_switch_table_rows_and_columns() -> None:
    table = switch_table(_hand_file())
    assert table.columns == ("resnet18/tiny@8", "gpt/small@8")
    assert table.seconds == {"cold": (2.5, 3.0), "pipelined": (0.25, 0.75),
                             "warm": (0.5, None), "resident": (0.125, None)}
    assert render_markdown(table).splitlines() == [
        "| switch (s) | resnet18/tiny@8 | gpt/small@8 |",
        "|---|---:|---:|",
        "| cold | 2.5 | 3 |",
        "| pipelined | 0.25 | 0.75 |",
        "| warm | 0.5 | - |",
        "| resident | 0.125 | - |",
    ]


def test_switch_table_with_several_devices_names_them() -> None:
    data = _hand_file()
    data.upsert(_switch("resnet18/tiny@8", "cold", 1.0, device="h100"))
    assert switch_table(data).columns == (
        "resnet18/tiny@8 on cpu", "gpt/small@8 on cpu", "resnet18/tiny@8 on h100")
    assert switch_table(data, size="small").columns == ("gpt/small@8",)
    only = switch_table(data, "h100")
    assert only.columns == ("resnet18/tiny@8",)
    assert only.seconds["cold"] == (1.0,) and only.seconds["warm"] == (None,)


def _run_table(argv: list[str]) -> int:
    """The ``profile-table`` handler behind a parser of its own, with the CLI's exit-code rule
    for bad input (the full CLI registers it in schedlab.cli.profile)."""
    parser = argparse.ArgumentParser(prog="schedlab")
    common = argparse.ArgumentParser(add_help=False)
    add_table_command(parser.add_subparsers(), common, argparse.ArgumentParser)
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except InputError as error:
        sys.stderr.write(f"error: {error}\n")
        return error.exit_code


def test_profile_table_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "throughputs.json"
    _hand_file().save(path)
    assert _run_table(["profile-table", str(path), "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows == [["switch", "resnet18/tiny@8", "gpt/small@8"],
                    ["cold", "2.5", "3.0"], ["pipelined", "0.25", "0.75"],
                    ["warm", "0.5", "-"], ["resident", "0.125", "-"]]
    out = tmp_path / "table.md"
    assert _run_table(["profile-table", str(path), "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 6 and lines[0].startswith("| switch (s) | resnet18/tiny@8 |")
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| cold", "| pipelined", "| warm", "| resident"]


def test_profile_table_bad_files_exit_2(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "schedlab/throughputs@1", "cells": [{"kind": "switch"}]}')
    assert _run_table(["profile-table", str(bad)]) == 2
    assert "error" in capsys.readouterr().err.lower()
    assert _run_table(["profile-table", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    empty = tmp_path / "empty.json"
    ThroughputFile().save(empty)
    assert _run_table(["profile-table", str(empty)]) == 2
    assert "no switch measurements" in capsys.readouterr().err
    good = tmp_path / "good.json"
    _hand_file().save(good)
    assert _run_table(["profile-table", str(good), "--size", "base"]) == 2
    assert "no switch measurements of size 'base'" in capsys.readouterr().err


def test_titan_switch_model_reads_the_measured_seconds(tmp_path: Path) -> None:
    path = tmp_path / "throughputs.json"
    _hand_file().save(path)
    model = titan_switch_from_profile(
        path, {"vit-base": "resnet18/tiny@8", "vit-large": "gpt/small@8"},
        checkpoint_s=10.0, gpu_counts=(1, 4))
    assert model.models == ("vit-base", "vit-large")
    assert model.cost("vit-base", 1) == TitanCost(2.5, 0.25)
    assert model.cost("vit-large", 8) == TitanCost(3.0, 0.75)
    assert model.overhead_s("vit-base", 4, pipelined=True) == pytest.approx(10.25, rel=1e-12)
    assert model.overhead_s("vit-large", 2, pipelined=False) == pytest.approx(13.0, rel=1e-12)
    warm = titan_switch_from_profile(_hand_file(), {"vit-base": "resnet18/tiny@8"},
                                     non_pipelined_kind="warm")
    assert warm.cost("vit-base", 1) == TitanCost(0.5, 0.25)
    with pytest.raises(InputError, match="no warm switch measured for 'gpt/small@8'"):
        titan_switch_from_profile(path, {"vit-large": "gpt/small@8"}, non_pipelined_kind="warm")


def test_titan_defaults_unchanged_without_a_profile() -> None:
    model = TitanSwitchModel.defaults()
    # Titan's V100 ViT-B context switch, 12 layers, checkpoint 30 s (module docstring)
    assert model.overhead_s("vit-base", 1, False) == pytest.approx(30 + 4.16124963760376,
                                                                   rel=1e-12)
    assert model.overhead_s("vit-base", 8, True) == pytest.approx(30 + 4.16124963760376 / 12,
                                                                  rel=1e-12)


def test_hare_switch_models_read_the_measured_seconds() -> None:
    data = _hand_file()
    data.upsert(_switch("gpt/small@8", "resident", 0.0625))
    models = {"ResNet-50": "resnet18/tiny@8", "BERT-base": "gpt/small@8"}
    devices = {"V100": "cpu"}

    def ctx(model: str, resident: bool) -> SwitchContext:
        return SwitchContext(model, "v100", 0.1, 16.0, resident=resident)

    cold = hare_switch_from_profile(data, "default", models, devices)
    assert [cold.seconds(ctx("ResNet-50", r)) for r in (False, True)] == [2.5, 2.5]
    assert cold.seconds(ctx("BERT-base", True)) == 3.0
    piped = hare_switch_from_profile(data, "pipelined", models, devices)
    assert piped.seconds(ctx("ResNet-50", True)) == 0.25
    hare = hare_switch_from_profile(data, "hare", models, devices)
    assert hare.name == "hare"
    assert hare.seconds(ctx("ResNet-50", False)) == 0.25
    assert hare.seconds(ctx("ResNet-50", True)) == 0.125
    assert hare.seconds(ctx("BERT-base", True)) == 0.0625
    with pytest.raises(InputError, match="no measured switch for model 'VGG19'"):
        hare.seconds(ctx("VGG19", False))
    with pytest.raises(InputError, match="no resident switch measured for 'gpt/small@8'"):
        hare_switch_from_profile(_hand_file(), "hare", models, devices)


def test_hare_defaults_unchanged_without_a_profile() -> None:
    # Table 1 row Default for ResNet-50 (5.96116 s) + 25.56 M x 4 B / (15.75 GB/s x 0.8)
    ctx = SwitchContext("ResNet-50", "v100", 25.56e6 * 4 / 1e9, 16.0, resident=True)
    assert hare_switch_model("default").seconds(ctx) == pytest.approx(
        5.96116 + 0.10224 / 12.6, rel=1e-9)
    assert hare_switch_model("hare").seconds(ctx) == pytest.approx(2.04e-3, rel=1e-9)


def test_hare_instance_switch_map_from_measured_seconds() -> None:
    """sigma[j][k] of a generated Hare instance under the measured model: every job gets its
    model's hand-set seconds on every type (all types profiled as 'cpu')."""
    from schedlab.workloads.hare import HARE_MODELS, generate_hare_instance
    from schedlab.world.hare_switching import switch_seconds_map

    data = ThroughputFile()
    jobs = {}
    for index, model in enumerate(HARE_MODELS):
        job = f"recommender/tiny@{index + 1}"
        jobs[model] = job
        data.upsert(_switch(job, "cold", 1.0 + index))
    instance = generate_hare_instance(6, seed=3)
    measured = hare_switch_from_profile(data, "default", jobs,
                                        {k: "cpu" for k in instance.cluster.types})
    sigma = switch_seconds_map(instance, measured)
    for job in instance.jobs:
        expected = 1.0 + HARE_MODELS.index(str(job.job_type).split(" (", 1)[0])
        assert sigma[job.id] == {k: expected for k in job.task_seconds}


def test_a_failing_worker_gives_error_cells(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Files that point at no checkpoint: the live worker fails in its setup and the cold
    child in its load; both cells say so instead of raising or inventing a time."""
    missing = tmp_path / "nothing"
    files = SwitchFiles(missing, 0, (), missing / "optimizer.ckpt", missing / "resident.ckpt")
    monkeypatch.setattr(switching, "prepare_switch_files", lambda spec, workdir: files)
    cells = measure_switches(SPEC, "cpu", "cpu", ["warm", "resident", "cold"], repeats=1,
                             workdir=tmp_path, warmup=0)
    assert [c.switch for c in cells] == ["warm", "resident", "cold"]
    for cell in cells:
        assert cell.status == "error" and cell.seconds is None and cell.repeats == 0
        assert f"no good checkpoint in {missing}" in str(cell.reason)


def test_schedlab_profile_table_is_registered(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from schedlab.cli import main

    path = tmp_path / "throughputs.json"
    _hand_file().save(path)
    assert main(["profile-table", str(path), "--size", "tiny"]) == 0
    assert capsys.readouterr().out.splitlines()[2] == "| cold | 2.5 |"
    assert main(["profile-table", str(tmp_path / "absent.json")]) == 2
    assert "absent.json" in capsys.readouterr().err
