"""``schedlab simulate|compare --workload FILE.json``: instance files as simulator workloads.

The simulated jobs must be the file's jobs (arrivals, steps, throughputs), on the file's
cluster unless ``--cluster`` overrides it; an override whose accelerator types do not match
the jobs' types is one ``error: <file>: --cluster: ...`` line, exit code 2, nothing written.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from schedlab.analysis.sweep import WorkloadSpec
from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.instance import load_instance
from schedlab.simulator.engine import jobs_from_instance
from schedlab.workloads.instance_jobs import (
    InstanceFile,
    workload_from_instance_file,
)

REPO = Path(__file__).resolve().parent.parent
SMALL_6 = REPO / "instances" / "gavel" / "small-6jobs.json"

#: Three single-GPU jobs on 2 V100 + 1 K80, listed out of arrival order; job c runs only on
#: V100.  Isolated times: a 7200/2 = 3600 s, b 360/1 = 360 s, c 720/4 = 180 s.
FILE_JOBS: dict[str, Any] = {
    "schema": "schedlab/instance@1",
    "name": "three-jobs",
    "cluster": {"accelerators": {"v100": {"count": 2, "cost_per_hour": 2.48},
                                 "k80": {"count": 1}}},
    "params": {"round_s": 360},
    "jobs": [
        {"id": "c", "arrival": 7200.0, "total_steps": 720.0,
         "throughput": {"v100": 4.0, "k80": 0.0}},
        {"id": "a", "arrival": 0.0, "total_steps": 7200.0,
         "throughput": {"v100": 2.0, "k80": 1.0}},
        {"id": "b", "arrival": 1800.0, "total_steps": 360.0,
         "throughput": {"v100": 1.0, "k80": 0.5}},
    ],
}
ISOLATED_S = {"a": 3600.0, "b": 360.0, "c": 180.0}


@pytest.fixture
def jobs_file(tmp_path: Path) -> Path:
    path = tmp_path / "three-jobs.json"
    path.write_text(json.dumps(FILE_JOBS), encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def simulate_table(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str
                   ) -> tuple[pd.DataFrame, str]:
    """``schedlab simulate --policy fifo ARGV --out runs.csv`` -> (per-job table, stdout)."""
    out_file = tmp_path / "runs.csv"
    code, out, err = run(capsys, "simulate", "--policy", "fifo", "--out", str(out_file),
                         *argv)
    assert code == 0, err
    return pd.read_csv(out_file), out


def by_job(frame: pd.DataFrame, column: str) -> dict[str, float]:
    return {str(j): float(v) for j, v in zip(frame["job"], frame[column], strict=True)}


# ------------------------------------------------------------------------- the jobs


def test_simulated_jobs_are_the_files_jobs(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path, jobs_file: Path) -> None:
    frame, out = simulate_table(capsys, tmp_path, "--workload", str(jobs_file))
    assert "instance file three-jobs.json; 3 GPUs (v100 x2, k80 x1)" in out
    assert sorted(frame["job"].astype(str)) == ["a", "b", "c"]
    assert by_job(frame, "arrival") == {"a": 0.0, "b": 1800.0, "c": 7200.0}
    assert by_job(frame, "total_steps") == {"a": 7200.0, "b": 360.0, "c": 720.0}
    assert by_job(frame, "steps") == pytest.approx(by_job(frame, "total_steps"))
    # isolated time = steps / fastest throughput: the file's throughputs reached the simulator
    assert by_job(frame, "isolated_time_s") == pytest.approx(ISOLATED_S)
    assert {c for c in frame.columns if c.startswith("time_on_")} == {"time_on_v100",
                                                                     "time_on_k80"}
    assert set(frame["run_gpus"]) == {3}
    assert by_job(frame, "time_on_k80")["c"] == 0.0  # c cannot run on a K80
    assert (frame["jct"] > 0).all()


def test_workload_spec_keeps_arrivals_throughputs_and_steps() -> None:
    expected = load_instance(SMALL_6)
    spec = WorkloadSpec(kind="instance", num_jobs=None, cluster=(("v100", 2), ("k80", 2)),
                        instance_file=InstanceFile(path=str(SMALL_6)))
    for seed in (0, 1):  # the same job stream for every seed
        built = spec.build(seed, None)
        assert built.cluster == expected.cluster
        got = {js.id: js for js in jobs_from_instance(built)}
        for job in expected.jobs:
            assert got[job.id].arrival == job.arrival
            assert got[job.id].total_steps == job.total_steps
            assert got[job.id].throughput == job.throughput
            assert got[job.id].scale_factor == job.scale_factor


def test_jobs_takes_the_earliest_arrivals(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path, jobs_file: Path) -> None:
    frame, _ = simulate_table(capsys, tmp_path, "--workload", str(jobs_file), "--jobs", "2")
    assert sorted(frame["job"].astype(str)) == ["a", "b"]


def test_first_jobs_drops_colocation_with_dropped_jobs(tmp_path: Path) -> None:
    data = copy.deepcopy(FILE_JOBS)
    data["jobs"][0]["colocated_throughput"] = {"a": {"v100": 1.0}}  # c <-> a
    data["jobs"][1]["colocated_throughput"] = {"c": {"v100": 1.0}}
    path = tmp_path / "coloc.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    instance = workload_from_instance_file(path, num_jobs=2)
    assert [job.id for job in instance.jobs] == ["a", "b"]
    assert all(job.colocated_throughput is None for job in instance.jobs)


def test_static_and_rate_rescale_arrivals(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path, jobs_file: Path) -> None:
    frame, out = simulate_table(capsys, tmp_path, "--workload", str(jobs_file), "--static")
    assert by_job(frame, "arrival") == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert "static" in out
    # 3 jobs over 7200 s = 1 job/h; at 2 jobs/h every arrival is halved
    frame, _ = simulate_table(capsys, tmp_path, "--workload", str(jobs_file),
                              "--jobs-per-hour", "2")
    assert by_job(frame, "arrival") == pytest.approx({"a": 0.0, "b": 900.0, "c": 3600.0})


def test_seeds_replay_the_same_file(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                    jobs_file: Path) -> None:
    frame, _ = simulate_table(capsys, tmp_path, "--workload", str(jobs_file),
                              "--seeds", "0,1")
    first = frame[frame["seed"] == 0].sort_values("job").reset_index(drop=True)
    second = frame[frame["seed"] == 1].sort_values("job").reset_index(drop=True)
    for column in ("arrival", "total_steps", "finish"):
        assert list(first[column]) == list(second[column])


def test_instance_prefix_and_yaml(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    small4 = REPO / "instances" / "gavel" / "small-4jobs.yaml"
    code, out, err = run(capsys, "simulate", "--policy", "fifo", "-q",
                         "--workload", f"instance:{small4}")
    assert code == 0, err
    assert out.startswith("fifo jobs_per_hour=file ")


# -------------------------------------------------------------------------- --cluster


def test_cluster_override(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                          jobs_file: Path) -> None:
    frame, out = simulate_table(capsys, tmp_path, "--workload", str(jobs_file),
                                "--cluster", "v100=1,k80=4")
    assert "5 GPUs (v100 x1, k80 x4)" in out
    assert set(frame["run_gpus"]) == {5}
    assert by_job(frame, "arrival") == {"a": 0.0, "b": 1800.0, "c": 7200.0}
    # positional v100:p100:k80 with p100=0: the type no job knows is left out
    frame, out = simulate_table(capsys, tmp_path, "--workload", str(jobs_file),
                                "--cluster", "1:0:1")
    assert "2 GPUs (v100 x1, k80 x1)" in out


def test_cluster_override_keeps_costs(jobs_file: Path) -> None:
    instance = workload_from_instance_file(jobs_file, cluster={"k80": 3, "v100": 1})
    assert instance.types == ["v100", "k80"]
    assert instance.cluster.accelerators["v100"].count == 1
    assert instance.cluster.accelerators["v100"].cost_per_hour == 2.48


@pytest.mark.parametrize(("spec", "reason"), [
    ("36:36:36", "no job has a throughput for p100"),
    ("v100=4", "it lacks k80"),
    ("v100=4,a100=2", "it lacks k80 and no job has a throughput for a100"),
])
def test_cluster_override_type_mismatch(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        jobs_file: Path, spec: str, reason: str) -> None:
    out_file = tmp_path / "runs.csv"
    code, out, err = run(capsys, "simulate", "--policy", "fifo", "--workload", str(jobs_file),
                         "--cluster", spec, "--out", str(out_file))
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {jobs_file}: --cluster: "), lines[0]
    assert reason in lines[0]
    assert "v100, k80" in lines[0]
    assert not out_file.exists()
    with pytest.raises(InputError):
        workload_from_instance_file(jobs_file, cluster={"v100": 4})


# ---------------------------------------------------------------------- other errors


def test_trace_options_need_a_trace(capsys: pytest.CaptureFixture[str],
                                    jobs_file: Path) -> None:
    code, _, err = run(capsys, "simulate", "--policy", "fifo", "--workload", str(jobs_file),
                       "--trace-format", "philly")
    assert code == 2
    assert "--trace-format" in err


def test_missing_steps_and_missing_file(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    data = copy.deepcopy(FILE_JOBS)
    del data["jobs"][1]["total_steps"]
    path = tmp_path / "no-steps.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run(capsys, "simulate", "--policy", "fifo", "--workload", str(path))
    assert code == 2
    assert err.startswith(f"error: {path}: jobs[1].total_steps: ")
    code, _, err = run(capsys, "simulate", "--policy", "fifo",
                       "--workload", str(tmp_path / "absent.json"))
    assert code == 2
    assert "absent.json" in err


# -------------------------------------------------------------------------- compare


def test_compare_gavel_policies_on_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "compare", "--workload", str(SMALL_6), "-q", "--policies",
                         "gavel.max_min_fairness,gavel.max_min_fairness_agnostic,fifo")
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "gavel.max_min_fairness", "gavel.max_min_fairness_agnostic", "fifo"]
    for line in lines:
        assert "jobs_per_hour=file" in line
        avg = dict(cell.split("=") for cell in line.split()[1:])["avg_jct_h"]
        assert float(avg) > 0


def test_mechanism_option_reaches_the_policy_and_the_run_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jobs_file: Path
) -> None:
    from schedlab.analysis import sweep

    assert sweep._policy_for("gavel.max_min_fairness", "gavel").mechanism == "gavel"
    assert sweep._policy_for("gavel.fifo_agnostic", "gavel").mechanism == "gavel"
    assert sweep._policy_for("fifo", "gavel") is not None  # no mechanism of its own
    spec = sweep.RunSpec(policy="fifo", jobs_per_hour=None, seed=0)
    assert spec.key != sweep.RunSpec(policy="fifo", jobs_per_hour=None, seed=0,
                                     mechanism="gavel").key
    out_file = tmp_path / "runs.csv"
    code, _, err = run(capsys, "simulate", "--policy", "gavel.max_min_fairness", "--mechanism",
                       "gavel", "--workload", str(jobs_file), "--out", str(out_file))
    assert code == 0, err
    frame = pd.read_csv(out_file)
    # Gavel's mechanism runs whole steps: every job finishes exactly its (whole) steps.
    assert by_job(frame, "steps") == by_job(frame, "total_steps")
