"""``schedlab profile-instance``: a hand-written throughput file -> each paper's instance.

Every expected number is derived here from the file's numbers by the mapping of
docs/profile-to-instance.md; ``--duration-s D,D`` pins the drawn durations to D so the
arithmetic is exact.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from schedlab.api import solve
from schedlab.check import check
from schedlab.errors import InputError
from schedlab.instance import Instance, load_instance
from schedlab.profiler.matrix import (
    ColocatedMeasurement,
    Measurement,
    RegimeMeasurement,
    SwitchMeasurement,
    TechniqueMeasurement,
    ThroughputFile,
)
from schedlab.profiler.to_instance import (
    DEFAULT_FORMULATION,
    PAPERS,
    InstanceOptions,
    adapted_schedule,
    device_counts,
    instance_from_file,
    instance_from_throughputs,
    usable_sizes,
)

REL = 1e-9
A = "resnet18/tiny@8"
B = "lstm/tiny@4"
#: steps/s of (job, scale factor, device); B was never measured on the h100.
SOLO = {(A, 1, "cpu"): 20.0, (A, 2, "cpu"): 36.0, (A, 1, "h100"): 400.0,
        (B, 1, "cpu"): 50.0, (B, 2, "cpu"): 80.0}
PEAK = {A: 30_000_000, B: 12_000_000}
SWITCH = {"cold": 1.5, "warm": 0.05, "pipelined": 0.03, "resident": 0.002}
STEP_S = {(A, "single", 1): 0.05, (A, "ddp", 2): 0.03, (B, "single", 1): 0.02,
          (B, "ddp", 2): 0.015}
#: seconds per epoch of SAMPLES samples (model, batch size).
REGIMES = {("resnet18/tiny", 8): 10.0, ("resnet18/tiny", 16): 6.0, ("resnet18/tiny", 32): 4.0,
           ("transformer/tiny", 4): 8.0, ("transformer/tiny", 8): 5.0}
SAMPLES = 500  # not a multiple of 8, 16, 32: an epoch is ceil(500 / b) steps


def measured_file() -> ThroughputFile:
    f = ThroughputFile()
    for (job, sf, device), value in SOLO.items():
        f.upsert(Measurement(job=job, device=device, scale_factor=sf, steps_per_s=value,
                             peak_memory_bytes=PEAK[job],
                             backend="cuda" if device == "h100" else "cpu"))
    f.upsert(Measurement(job="gpt/tiny@2", device="cpu", status="error", reason="boom"))
    for job in (A, B):
        for kind, seconds in SWITCH.items():
            # B switches twice as slowly as A: the values tell the jobs apart
            f.upsert(SwitchMeasurement(job=job, device="cpu", switch=kind,
                                       seconds=seconds * (2 if job == B else 1)))
    f.upsert(SwitchMeasurement(job=A, device="h100", switch="warm", seconds=0.5))
    for (job, technique, gpus), step_s in STEP_S.items():
        f.upsert(TechniqueMeasurement(job=job, device="cpu", technique=technique, gpus=gpus,
                                      step_s=step_s, peak_memory_bytes=PEAK[job]))
    f.upsert(TechniqueMeasurement(job=A, device="cpu", technique="fsdp", gpus=2,
                                  status="infeasible", reason="FSDP needs CUDA"))
    f.upsert(ColocatedMeasurement(jobs=(A, B), device="cpu", steps_per_s=(12.0, 30.0)))
    f.upsert(ColocatedMeasurement(jobs=(A, A), device="cpu", steps_per_s=(11.0, 11.0)))
    for (model, batch), seconds in REGIMES.items():
        f.upsert(RegimeMeasurement(model=model, device="cpu", batch_size=batch,
                                   samples_per_epoch=SAMPLES, seconds_per_epoch=seconds))
    return f


def build(paper: str, jobs: int = 12, **options: object) -> Instance:
    return instance_from_throughputs(measured_file(),
                                     InstanceOptions(paper=paper, jobs=jobs, **options),
                                     source="measured.json")


def test_default_cluster_is_every_label_at_its_largest_measured_count() -> None:
    assert device_counts(measured_file()) == {"cpu": 2, "h100": 1}


def test_gavel_numbers_are_the_measured_ones() -> None:
    d = 300.0
    inst = build("gavel", jobs=40, seed=3, duration_s=(d, d))
    assert {k: p.count for k, p in inst.cluster.accelerators.items()} == {"cpu": 2, "h100": 1}
    assert inst.params.round_s == 360.0
    seen_sf = set()
    for job in inst.jobs:
        sf = job.scale_factor
        seen_sf.add(sf)
        expected = {k: v for (j, s, k), v in SOLO.items() if j == job.job_type and s == sf}
        assert job.throughput == pytest.approx(expected, rel=REL)
        # the duration is defined on the fastest type: round(d x max_k T)
        assert job.total_steps == round(d * max(expected.values()))
        # the largest measured warm switch over the cluster's types (A: 0.5 s on the h100)
        assert job.switch_overhead_s == pytest.approx(
            0.5 if job.job_type == A else 2 * SWITCH["warm"], rel=REL)
    assert seen_sf == {1, 2}  # Gavel's mix over the measured scale factors


def test_gavel_missing_measurement_means_the_job_cannot_run_there() -> None:
    inst = build("gavel", jobs=40, seed=3)
    lstm = [job for job in inst.jobs if job.job_type == B]
    resnet_single = [job for job in inst.jobs if job.job_type == A and job.scale_factor == 1]
    resnet_double = [job for job in inst.jobs if job.job_type == A and job.scale_factor == 2]
    assert lstm and resnet_single and resnet_double
    assert all(set(job.throughput) == {"cpu"} for job in lstm)
    assert all(set(job.throughput) == {"cpu", "h100"} for job in resnet_single)
    assert all(set(job.throughput) == {"cpu"} for job in resnet_double)  # no 2 x h100 cell


def test_gavel_colocation_from_the_pair_cells_in_either_order() -> None:
    inst = build("gavel", jobs=30, seed=5, devices={"cpu": 2})
    by_id = {job.id: job for job in inst.jobs}
    pairs = 0
    for job in inst.jobs:
        for other, by_type in (job.colocated_throughput or {}).items():
            pairs += 1
            partner = by_id[other]
            assert job.scale_factor == partner.scale_factor == 1
            if job.job_type == A and partner.job_type == B:
                assert by_type == {"cpu": 12.0}
            elif job.job_type == B and partner.job_type == A:
                assert by_type == {"cpu": 30.0}
            else:  # A with A was measured; B with B was not
                assert job.job_type == partner.job_type == A
                assert by_type == {"cpu": 11.0}
    singles = [job for job in inst.jobs if job.scale_factor == 1]
    n_a = sum(job.job_type == A for job in singles)
    n_b = len(singles) - n_a
    assert pairs == 2 * (n_a * n_b + n_a * (n_a - 1) // 2)


def test_shockwave_epochs_regimes_and_schedules() -> None:
    d = 2000.0
    inst = build("shockwave", jobs=30, seed=2, duration_s=(d, d))
    assert inst.params.round_s == 120.0 and inst.params.window_rounds == 20
    assert set(inst.types) == {"cpu"}
    modes = set()
    for job in inst.jobs:
        model, b0 = job.job_type.split("@")[0], int(job.job_type.split("@")[1])
        measured = {b: s for (m, b), s in REGIMES.items() if m == model}
        epochs = math.ceil(d / measured[b0])
        assert job.epochs == epochs
        steps_per_epoch = math.ceil(SAMPLES / b0)
        assert job.total_steps == epochs * steps_per_epoch
        assert job.throughput["cpu"] == pytest.approx(steps_per_epoch / measured[b0], rel=REL)
        assert job.regimes is not None and job.batch_schedule is not None
        for size, seconds in job.regimes.items():
            assert seconds == measured[int(size)]
        assert job.batch_schedule == adapted_schedule(
            b0, list(measured), epochs, job.adaptation or "", model.split("/")[0])
        modes.add(job.adaptation)
        if model.startswith("transformer"):
            assert set(job.batch_schedule) == {b0}
    assert modes == {"accordion", "gns"}  # Shockwave's mix: static 0, accordion 1/2, gns 1/2


def test_adapted_schedule_rules_by_hand() -> None:
    # GNS over 8 < 16 < 32 in 6 epochs: 16 from floor(6/3) = 2, 32 from floor(12/3) = 4
    assert adapted_schedule(8, [8, 16, 32], 6, "gns", "resnet18") == [8, 8, 16, 16, 32, 32]
    # Accordion: the largest size in epochs e > 0.3 x 10 = 3
    assert adapted_schedule(8, [8, 16, 32], 10, "accordion", "resnet18") == [8] * 4 + [32] * 6
    assert adapted_schedule(16, [8, 16, 32], 4, "static", "resnet18") == [16] * 4
    assert adapted_schedule(8, [8, 16], 4, "gns", "transformer") == [8] * 4
    assert adapted_schedule(32, [8, 16, 32], 4, "gns", "resnet18") == [32] * 4
    assert usable_sizes(8, [8, 16, 32], "gns", "resnet18") == [8, 16, 32]
    assert usable_sizes(8, [8, 16, 32], "accordion", "resnet18") == [8, 32]
    assert usable_sizes(8, [8, 16, 32], "accordion", "transformer") == [8]


def test_short_accordion_jobs_become_static() -> None:
    inst = build("shockwave", jobs=20, seed=2, duration_s=(600.0, 600.0))
    assert {job.adaptation for job in inst.jobs} == {"static", "gns"}


def test_saturn_configs_are_steps_times_step_time() -> None:
    d = 900.0
    inst = build("saturn", jobs=10, seed=4, duration_s=(d, d))
    assert inst.cluster.nodes is not None and [n.gpus for n in inst.cluster.nodes] == [2]
    for job in inst.jobs:
        assert job.configs is not None and job.total_steps is not None
        # reference: the fewest devices, then the fastest (single on 1 device)
        assert job.total_steps == round(d / STEP_S[(job.job_type, "single", 1)])
        by_key = {(c.technique, c.gpus): c for c in job.configs}
        for (name, technique, gpus), step_s in STEP_S.items():
            if name == job.job_type:
                config = by_key[(technique, gpus)]
                assert config.feasible
                assert config.runtime_s == pytest.approx(job.total_steps * step_s, rel=REL)
                assert config.memory_gb == pytest.approx(PEAK[name] / 1e9, rel=REL)
        if job.job_type == A:
            fsdp = by_key[("fsdp", 2)]
            assert not fsdp.feasible and fsdp.reason == "FSDP needs CUDA"
        else:
            assert ("fsdp", 2) not in by_key


def test_titan_duration_profile_is_the_same_samples_at_each_count() -> None:
    d = 1200.0
    inst = build("titan", jobs=10, seed=6, duration_s=(d, d), devices={"cpu": 2})
    assert inst.params.round_s == 120.0
    for job in inst.jobs:
        g = job.scale_factor
        thr = {s: v for (j, s, k), v in SOLO.items() if j == job.job_type and k == "cpu"}
        assert job.total_steps == round(d * thr[g])
        assert job.throughput == {"cpu": thr[g]}
        assert job.duration_s is not None
        # samples/s on a devices = T(a) x a x batch: d(a) = d T(g) g / (T(a) a)
        assert job.duration_s == pytest.approx(
            {str(a): d * thr[g] * g / (thr[a] * a) for a in thr}, rel=REL)
        assert job.duration_s[str(g)] == pytest.approx(d, rel=REL)
        assert job.base_model == job.job_type.split("@")[0] and job.max_gpus == 2
        assert job.classes and job.label_set
        pipelined = SWITCH["pipelined"] * (2 if job.job_type == B else 1)
        assert job.switch_overhead_s == pytest.approx(pipelined, rel=REL)


def test_titan_needs_one_device_type() -> None:
    with pytest.raises(InputError, match="one device type"):
        build("titan", devices={"cpu": 2, "h100": 1})


@pytest.mark.parametrize(("switch", "kinds"), [("hare", ("resident", "pipelined")),
                                               ("pipelined", ("pipelined",)),
                                               ("default", ("cold",))])
def test_hare_task_seconds_switches_and_memory(switch: str, kinds: tuple[str, ...]) -> None:
    tau = 30.0
    inst = build("hare", jobs=12, seed=7, duration_s=(tau, tau), switch=switch)
    for job in inst.jobs:
        speeds = {k: v for (j, s, k), v in SOLO.items() if j == job.job_type and s == 1}
        steps = round(tau * max(speeds.values()))
        assert job.task_seconds == pytest.approx({k: steps / v for k, v in speeds.items()},
                                                 rel=REL)
        assert job.rounds is not None and job.tasks_per_round is not None
        assert job.total_steps == steps * job.rounds * job.tasks_per_round
        factor = 2 if job.job_type == B else 1
        # switches were measured on the cpu only
        assert job.switch_seconds == pytest.approx(
            {"cpu": min(SWITCH[k] for k in kinds) * factor}, rel=REL)
        assert job.model_memory_gb == pytest.approx(PEAK[job.job_type] / 1e9, rel=REL)
        assert 2 <= job.rounds <= 10 and job.tasks_per_round in (1, 2, 4, 8)


def test_hare_without_switch_costs() -> None:
    assert all(job.switch_seconds is None for job in build("hare", switch="none").jobs)


@pytest.mark.parametrize("paper", PAPERS)
def test_seeds_reproduce_and_differ(paper: str) -> None:
    one = build(paper, jobs=8, seed=11).to_dict()
    assert json.dumps(one, sort_keys=True) == json.dumps(build(paper, jobs=8, seed=11)
                                                         .to_dict(), sort_keys=True)
    assert one["jobs"] != build(paper, jobs=8, seed=12).to_dict()["jobs"]


@pytest.mark.parametrize("paper", PAPERS)
def test_each_paper_solves_with_its_formulation_and_passes_the_checker(paper: str,
                                                                       tmp_path: Path) -> None:
    options = {"duration_s": (60.0, 600.0), "arrival_rate": 120.0} if paper == "titan" else {}
    inst = build(paper, jobs=5, seed=1, **options)
    path = tmp_path / f"{paper}.json"
    path.write_text(json.dumps(inst.to_dict()))
    loaded = load_instance(path)  # what `schedlab validate` does
    solution = solve(loaded, DEFAULT_FORMULATION[paper], time_limit=30)
    assert solution.status.has_solution, solution.status
    assert solution.violations == []
    assert check(loaded, solution) == []


@pytest.mark.parametrize(("paper", "missing"), [("shockwave", "regime"),
                                                ("saturn", "technique"),
                                                ("gavel", "solo"), ("titan", "solo"),
                                                ("hare", "solo")])
def test_no_usable_cell_names_the_file_and_what_is_missing(paper: str, missing: str,
                                                           tmp_path: Path) -> None:
    measured = measured_file()
    keep = {"shockwave": RegimeMeasurement, "saturn": TechniqueMeasurement}
    measured.cells = [c for c in measured.cells if not isinstance(c, keep.get(paper, Measurement))]
    path = tmp_path / "partial.json"
    measured.save(path)
    with pytest.raises(InputError) as info:
        instance_from_file(path, InstanceOptions(paper=paper, jobs=3))
    assert info.value.file == str(path)
    assert missing in info.value.reason and paper in info.value.reason
    assert "\n" not in str(info.value)


def test_the_description_records_the_file_and_its_sha256(tmp_path: Path) -> None:
    import hashlib

    path = tmp_path / "measured.json"
    measured_file().save(path)
    inst = instance_from_file(path, InstanceOptions(paper="gavel", jobs=3))
    assert inst.description is not None
    assert str(path) in inst.description
    assert hashlib.sha256(path.read_bytes()).hexdigest() in inst.description
    assert inst.name == "gavel-measured-3jobs-seed0"


def test_unknown_device_is_rejected() -> None:
    with pytest.raises(InputError, match="'a100'"):
        build("gavel", devices={"a100": 4})


# ------------------------------------------------------------------------------------ CLI


def test_cli_writes_an_instance_that_validates(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from schedlab.cli import main

    measured = tmp_path / "measured.json"
    measured_file().save(measured)
    out = tmp_path / "hare.json"
    argv = ["profile-instance", str(measured), "--paper", "hare", "--jobs", "4", "--seed", "2",
            "--devices", "cpu=2", "--duration-s", "20,20", "--switch", "pipelined",
            "--out", str(out)]
    assert main(argv) == 0
    assert str(out) in capsys.readouterr().out
    assert main(["validate", str(out)]) == 0
    written = load_instance(out)
    same = build("hare", jobs=4, seed=2, devices={"cpu": 2}, duration_s=(20.0, 20.0),
                 switch="pipelined")
    assert written.to_dict()["jobs"] == same.to_dict()["jobs"]
    assert written.description is not None and str(measured) in written.description
    assert set(written.types) == {"cpu"} and written.cluster.accelerators["cpu"].count == 2


def test_cli_exit_2_names_the_file_and_the_missing_cells(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from schedlab.cli import main

    measured = measured_file()
    measured.cells = [c for c in measured.cells if not isinstance(c, RegimeMeasurement)]
    path = tmp_path / "no-regimes.json"
    measured.save(path)
    code = main(["profile-instance", str(path), "--paper", "shockwave", "--jobs", "3",
                 "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and str(path) in err and "regime" in err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("bad", [["--devices", "cpu"], ["--devices", "cpu=0"],
                                 ["--duration-s", "5,1"], ["--jobs", "0"],
                                 ["--paper", "pollux"]])
def test_cli_rejects_bad_arguments(bad: list[str], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from schedlab.cli import main

    path = tmp_path / "measured.json"
    measured_file().save(path)
    args = {"--paper": "gavel", "--jobs": "3", "--out": str(tmp_path / "x.json")}
    args.update(dict(zip(bad[::2], bad[1::2], strict=True)))
    argv = ["profile-instance", str(path)] + [x for kv in args.items() for x in kv]
    assert main(argv) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
