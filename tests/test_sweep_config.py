"""``schedlab sweep CONFIG.yaml``: checking the file, resuming, the summary, the paper kinds.

Every bad file must give exit code 2, one ``error:`` line naming the file and the field, and
no output folder.  The summary's means are recomputed here from the result files.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from schedlab.analysis import sweep
from schedlab.analysis.paper_workloads import hare_workload, titan_workload
from schedlab.analysis.sweep_config import load_sweep_config
from schedlab.cli import main
from schedlab.errors import InputError

TINY: dict[str, Any] = {
    "policies": ["fifo", "srtf"],
    "seeds": [0, 1],
    "out": "runs",
    "workloads": [{"name": "tiny", "kind": "gavel", "jobs": 4, "cluster": "2:2:2",
                   "loads": [20]}],
    "options": {"format": "csv"},
}


def write_config(folder: Path, data: Any, name: str = "sweep.yaml") -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def with_changes(**changes: Any) -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(TINY))
    data.update(changes)
    return data


# ------------------------------------------------------------------------- bad files


BAD_FILES: list[tuple[str, Any, str]] = [
    ("no policies", {k: v for k, v in TINY.items() if k != "policies"}, "policies"),
    ("typo at the top", with_changes(polices=["fifo"]), "polices"),
    ("unknown kind", with_changes(workloads=[{"kind": "gavl"}]), "workloads[0].kind"),
    ("zero jobs", with_changes(workloads=[{"kind": "gavel"}, {"kind": "hare", "jobs": 0}]),
     "workloads[1].jobs"),
    ("trace option on gavel", with_changes(workloads=[{"kind": "gavel", "format": "philly"}]),
     "workloads[0].format"),
    ("negative seed", with_changes(seeds=[0, -1]), "seeds[1]"),
    ("bad seed range", with_changes(seeds="0-x"), "seeds"),
    ("zero load", with_changes(loads=[4, 0]), "loads[1]"),
    ("bad cluster", with_changes(cluster="1:2"), "cluster"),
    ("bad backend", with_changes(options={"backend": "spark"}), "options.backend"),
    ("bad workers", with_changes(options={"workers": 0}), "options.workers"),
    ("same name twice", with_changes(workloads=[{"kind": "gavel", "jobs": 3},
                                                {"kind": "gavel", "jobs": 4}]),
     "workloads[1].name"),
    ("missing trace", with_changes(workloads=[{"kind": "trace", "path": "nope.csv",
                                               "format": "philly"}]), "workloads[0].path"),
    ("static with a rate", with_changes(workloads=[
        {"kind": "instance", "path": "inst.json", "static": True, "loads": [5]}]),
     "workloads[0].static"),
    ("unknown policy", with_changes(policies=["fifo", "no-such-policy"]), "policies[1]"),
    ("titan on two types", with_changes(workloads=[{"kind": "titan", "jobs": 4,
                                                    "cluster": "v100=4,k80=4"}]),
     "workloads[0] (titan)"),
    ("not YAML", "policies: [fifo\nworkloads: [", "line "),
    ("unknown throughputs", with_changes(workloads=[{"kind": "shockwave", "throughputs": "tacc"}]),
     "workloads[0].throughputs"),
    ("throughputs on gavel", with_changes(workloads=[{"kind": "gavel", "throughputs": "gavel"}]),
     "workloads[0].throughputs"),
]


@pytest.mark.parametrize(("data", "field"), [case[1:] for case in BAD_FILES],
                         ids=[case[0] for case in BAD_FILES])
def test_a_bad_file_is_one_error_naming_file_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], data: Any, field: str) -> None:
    (tmp_path / "inst.json").write_text(
        Path("instances/shockwave/tiny-6jobs.json").read_text(encoding="utf-8"))
    config = write_config(tmp_path, data)
    assert main(["sweep", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"error: {config}: {field}"), err[0]
    assert not (tmp_path / "runs").exists()


def test_no_output_folder_is_an_error(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, {k: v for k, v in TINY.items() if k != "out"})
    assert main(["sweep", str(config)]) == 2
    assert "out" in capsys.readouterr().err


def test_the_ray_backend_without_ray_says_how_to_install_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    config = write_config(tmp_path, TINY)
    assert main(["sweep", str(config), "--backend", "ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'schedlab[ray]'" in err[0]
    assert not (tmp_path / "runs").exists()


def test_relative_paths_follow_the_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "inst.json").write_text(
        Path("instances/shockwave/tiny-6jobs.json").read_text(encoding="utf-8"))
    config = write_config(tmp_path / "sub", with_changes(
        workloads=[{"kind": "instance", "path": "../inst.json"}]))
    loaded = load_sweep_config(config)
    assert loaded.out_dir == (tmp_path / "sub" / "runs").resolve()
    file = loaded.workloads[0].spec.instance_file
    assert file is not None and Path(file.path) == (tmp_path / "inst.json").resolve()
    # 2 policies x 1 load (the file's own timing) x 2 seeds
    assert len(loaded.runs()) == 4


def test_kind_defaults_and_overrides(tmp_path: Path) -> None:
    config = write_config(tmp_path, with_changes(
        loads=[3, 6], cluster="v100=8",
        workloads=["shockwave", {"kind": "titan"}, {"kind": "gavel", "loads": [None]}]))
    loaded = load_sweep_config(config)
    shockwave, titan, gavel = loaded.workloads
    assert shockwave.spec.num_jobs == 120 and shockwave.loads == (3.0, 6.0)
    assert titan.spec.cluster == (("v100", 8),) and titan.spec.num_jobs is None
    assert gavel.loads == (None,) and gavel.spec.num_jobs == 100
    # (2 + 2 + 1 loads) x 2 policies x 2 seeds
    assert len(loaded.runs()) == 20
    # shockwave's throughputs are `schedlab simulate`'s (shockwave-tacc) unless named
    assert shockwave.spec.throughputs == "shockwave-tacc" and gavel.spec.throughputs is None
    config = write_config(tmp_path, with_changes(
        workloads=[{"kind": "shockwave", "throughputs": "gavel"}]), name="gavel.yaml")
    assert load_sweep_config(config).workloads[0].spec.throughputs == "gavel"


# ------------------------------------------------------------------- running, resuming


def test_a_rerun_does_no_work_and_the_summary_matches_the_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, TINY)
    assert main(["sweep", str(config), "-q"]) == 0
    first = capsys.readouterr().out
    folder = tmp_path / "runs"
    files = sorted(folder.iterdir())
    assert len(files) == 4  # 2 policies x 1 load x 2 seeds
    stamps = {p.name: p.stat().st_mtime_ns for p in files}

    assert main(["sweep", str(config), "-q"]) == 0
    assert capsys.readouterr().out == first
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps

    # Each policy's line: avg JCT = mean over the seeds of the mean per-job JCT of its files.
    lines = {line.split()[1]: line for line in first.strip().splitlines()}
    for policy in ("fifo", "srtf"):
        per_seed = [pd.read_csv(p)["jct"].mean() for p in files
                    if p.name.startswith(f"{policy}__")]
        assert len(per_seed) == 2
        cell = next(c for c in lines[policy].split() if c.startswith("avg_jct_s="))
        assert float(cell.split("=")[1]) == pytest.approx(np.mean(per_seed), rel=1e-5)

    # A lost file is the only run done again.
    lost = files[0]
    lost.unlink()
    assert main(["sweep", str(config), "-q"]) == 0
    after = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert set(after) == set(stamps)
    assert {n for n in after if after[n] != stamps[n]} == {lost.name}


def test_out_on_the_command_line_wins(tmp_path: Path) -> None:
    config = write_config(tmp_path, with_changes(policies=["fifo"], seeds=[0]))
    other = tmp_path / "elsewhere"
    assert main(["sweep", str(config), "--out", str(other), "-q"]) == 0
    assert len(list(other.iterdir())) == 1 and not (tmp_path / "runs").exists()


# ----------------------------------------------------------------------- paper kinds


def test_titan_stream_rescaled_to_a_rate_and_on_one_type() -> None:
    instance = titan_workload(6, {"v100": 8}, seed=3, jobs_per_hour=12.0)
    arrivals = sorted(job.arrival for job in instance.jobs)
    # mean rate (J - 1) / span = 12 jobs/hour
    assert (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) * 3600 == \
        pytest.approx(12.0, rel=1e-9)
    assert instance.params.round_s == 120.0
    with pytest.raises(InputError, match="one accelerator type"):
        titan_workload(6, {"v100": 4, "k80": 4}, seed=0, jobs_per_hour=None)


def test_hare_stream_is_gangs_with_rounds_as_steps() -> None:
    from schedlab.workloads.hare import generate_hare_instance

    cluster = {"v100": 8, "k80": 8}
    batch = hare_workload(5, cluster, seed=1, jobs_per_hour=None)
    source = generate_hare_instance(5, seed=1, cluster=cluster, arrivals="batch")
    assert all(job.arrival == 0.0 for job in batch.jobs)
    # Hare's job: rounds R_j of m_j tasks, p[j,k] seconds a task on type k; its gang: m_j
    # GPUs, R_j steps, throughput 1 / p[j,k] rounds/s on each type with m_j GPUs or more.
    for gang, job in zip(batch.jobs, source.to_dict()["jobs"], strict=True):
        assert gang.id == job["id"]
        assert gang.scale_factor == job["tasks_per_round"]
        assert gang.total_steps == job["rounds"]
        for acc, seconds in job["task_seconds"].items():
            expected = 1.0 / seconds if cluster[acc] >= job["tasks_per_round"] else 0.0
            assert gang.throughput[acc] == pytest.approx(expected, rel=1e-9)
    poisson = hare_workload(5, cluster, seed=1, jobs_per_hour=30.0)
    assert max(job.arrival for job in poisson.jobs) > 0


def test_paper_kinds_run_in_a_sweep(tmp_path: Path) -> None:
    specs = [sweep.RunSpec("srtf", None, 0, sweep.WorkloadSpec(kind=kind, num_jobs=4,
                                                                cluster=cluster))
             for kind, cluster in (("titan", (("v100", 4),)),
                                   ("hare", (("v100", 4), ("k80", 4))))]
    report = sweep.run_sweep(specs, tmp_path, fmt="csv", progress=False)
    for spec in specs:
        frame = pd.read_csv(report.files[spec.key])
        assert len(frame) == 4 and frame["finish"].notna().all()
