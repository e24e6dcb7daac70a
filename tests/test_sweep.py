"""Sweeps: one atomic result file per run, resume after an interrupt, process pool, tables.

Most tests use :func:`fake_runner`, a stand-in simulator that turns the run's real workload
into a per-job table without simulating (finish = arrival + isolated time x a per-policy
slowdown), so they are fast and independent of the policies.  One test runs the real
simulator when the policy registry is there.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from schedlab.analysis import sweep
from schedlab.analysis.sweep import RunOutput, RunSpec, WorkloadSpec
from schedlab.cli import main
from schedlab.errors import InputError, SchedlabError
from schedlab.policies.base import Policy
from schedlab.policies.state import Assignment, ClusterState

SMALL = WorkloadSpec(kind="gavel", num_jobs=5, cluster=(("v100", 4), ("k80", 4)))
SLOWDOWN = {"fast": 1.0, "slow": 2.0}


def fake_runner(spec: RunSpec) -> RunOutput:
    """Stand-in simulator: job j finishes at a_j + slowdown x t_iso_j, never preempted."""
    if spec.policy == "boom":
        raise RuntimeError("simulated crash")
    if spec.policy == "interrupt" and spec.seed == 2:
        raise KeyboardInterrupt
    instance = spec.workload.build(spec.seed, spec.jobs_per_hour, spec.round_s)
    rows = []
    for job in instance.jobs:
        isolated = (job.total_steps or 0.0) / max(job.throughput.values())
        finish = job.arrival + SLOWDOWN.get(spec.policy, 1.5) * isolated
        rows.append({"job": job.id, "arrival": job.arrival, "start": job.arrival,
                     "finish": finish, "jct": finish - job.arrival,
                     "scale_factor": job.scale_factor, "weight": job.weight,
                     "preemptions": 0, "migrations": 0,
                     "gpu_seconds": job.scale_factor * isolated, "isolated_time_s": isolated})
    return RunOutput(jobs=pd.DataFrame(rows), solver_time_s=0.5, decisions=10)


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --------------------------------------------------------------------------- cluster spec


@pytest.mark.parametrize(("text", "expected"), [
    ("36:36:36", {"v100": 36, "p100": 36, "k80": 36}),
    ("4:0:2", {"v100": 4, "p100": 0, "k80": 2}),
    ("v100=8, k80=4", {"v100": 8, "k80": 4}),
])
def test_parse_cluster_spec(text: str, expected: dict[str, int]) -> None:
    assert sweep.parse_cluster_spec(text) == expected


@pytest.mark.parametrize(("text", "fragment"), [
    ("36:x:36", "'x' is not a GPU count"),
    ("36:36", "expected 3 counts v100:p100:k80"),
    ("36:36:36:36", "expected 3 counts"),
    ("0:0:0", "zero GPUs"),
    ("v100=8,v100=4", "v100 is given twice"),
    ("v100", "expected 3 counts"),
    ("v100=8,k80", "'k80' is not type=count"),
    ("v100=-1", "negative"),
    ("", "empty cluster spec"),
])
def test_parse_cluster_spec_errors(text: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        sweep.parse_cluster_spec(text)


# ------------------------------------------------------------------------------- sweeps


def test_sweep_writes_one_file_per_run_and_resumes(tmp_path: Path) -> None:
    specs = sweep.plan_runs(["fast", "slow"], [6.0], [0, 1], SMALL)
    report = sweep.run_sweep(specs, tmp_path, runner=fake_runner, progress=False, fmt="csv")
    assert len(report.ran) == 4 and not report.skipped
    assert files(tmp_path) == sorted(f"{s.key}.csv" for s in specs)
    assert specs[3].key == f"slow__jph6__seed1__{specs[3].fingerprint}"
    one = pd.read_csv(tmp_path / f"{specs[3].key}.csv")
    assert set(one["policy"]) == {"slow"} and set(one["seed"]) == {1}
    assert set(one["run_gpus"]) == {8} and set(one["run_decisions"]) == {10}
    # A rerun (e.g. with one more seed) runs only what is missing.
    more = sweep.plan_runs(["fast", "slow"], [6.0], [0, 1, 2], SMALL)
    again = sweep.run_sweep(more, tmp_path, runner=fake_runner, progress=False, fmt="csv")
    assert sorted(s.key for s in again.ran) == [more[2].key, more[5].key]
    assert [(s.policy, s.seed) for s in again.ran] == [("fast", 2), ("slow", 2)]
    # Another workload (more jobs) in the same folder does not reuse these runs.
    bigger = WorkloadSpec(kind="gavel", num_jobs=6, cluster=SMALL.cluster)
    other = sweep.plan_runs(["fast"], [6.0], [0], bigger)
    assert len(sweep.run_sweep(other, tmp_path, runner=fake_runner, progress=False,
                               fmt="csv").ran) == 1
    assert len(again.skipped) == 4 and len(again.files) == 6


def test_interrupted_sweep_keeps_finished_runs_and_resumes(tmp_path: Path) -> None:
    specs = sweep.plan_runs(["interrupt"], [6.0], [0, 1, 2, 3], SMALL)
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(specs, tmp_path, runner=fake_runner, progress=False, fmt="csv")
    # Runs 0 and 1 finished; run 2 was interrupted and left nothing, not even a temp file.
    assert files(tmp_path) == [f"{specs[0].key}.csv", f"{specs[1].key}.csv"]
    resumed = [RunSpec(policy="interrupt", jobs_per_hour=6.0, seed=s, workload=SMALL)
               for s in (0, 1, 3)]
    report = sweep.run_sweep(resumed, tmp_path, runner=fake_runner, progress=False, fmt="csv")
    assert [s.seed for s in report.ran] == [3] and len(report.skipped) == 2


def test_process_pool(tmp_path: Path) -> None:
    specs = sweep.plan_runs(["fast", "slow"], [3.0, 6.0], [0], SMALL)
    report = sweep.run_sweep(specs, tmp_path, workers=2, runner=fake_runner, progress=False,
                             fmt="csv")
    assert len(report.ran) == 4
    assert len([f for f in files(tmp_path) if f.endswith(".csv")]) == 4
    assert not [f for f in files(tmp_path) if f.startswith(".")]


def test_process_pool_reraises_a_failed_run(tmp_path: Path) -> None:
    specs = [RunSpec("boom", 6.0, 0, SMALL), RunSpec("fast", 6.0, 0, SMALL)]
    with pytest.raises(RuntimeError, match="simulated crash"):
        sweep.run_sweep(specs, tmp_path, workers=2, runner=fake_runner, progress=False,
                        fmt="csv")
    assert not [f for f in files(tmp_path) if f.startswith(".")]


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: pd.DataFrame, path: str, **kwargs: object) -> None:
        Path(path).write_text("half", encoding="utf-8")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    with pytest.raises(OSError, match="disk full"):
        sweep.write_frame_atomic(pd.DataFrame({"a": [1]}), tmp_path / "r.csv")
    assert files(tmp_path) == []


def test_sweep_input_errors(tmp_path: Path) -> None:
    spec = RunSpec("fast", 6.0, 0, SMALL)
    with pytest.raises(InputError, match="workers must be >= 1"):
        sweep.run_sweep([spec], tmp_path, workers=0, runner=fake_runner)
    with pytest.raises(InputError, match=r"lists run\(s\) twice"):
        sweep.run_sweep([spec, spec], tmp_path, runner=fake_runner)
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="the sweep needs a folder"):
        sweep.run_sweep([spec], tmp_path / "file", runner=fake_runner)
    with pytest.raises(InputError, match="unknown result format"):
        sweep.write_frame_atomic(pd.DataFrame(), tmp_path / "r.txt")
    if not sweep.has_pyarrow():
        with pytest.raises(InputError, match="pyarrow"):
            sweep.write_frame_atomic(pd.DataFrame(), tmp_path / "r.parquet")


def test_summaries_and_aggregates(tmp_path: Path) -> None:
    specs = sweep.plan_runs(["fast", "slow"], [6.0], [0, 1], SMALL)
    sweep.run_sweep(specs, tmp_path, runner=fake_runner, progress=False, fmt="csv")
    results = sweep.load_results(tmp_path)
    assert len(results) == 4 * 5
    summary = sweep.summarize_runs(results)
    assert len(summary) == 4
    fast = summary[summary["policy"] == "fast"]
    slow = summary[summary["policy"] == "slow"]
    # The stand-in makes every JCT of "slow" exactly twice that of "fast" on the same jobs.
    assert (slow["avg_jct_s"].to_numpy() == pytest.approx(2 * fast["avg_jct_s"].to_numpy()))
    assert set(summary["solver_time_per_decision_s"]) == {0.05}
    table = sweep.aggregate(summary)
    assert list(table["policy"]) == ["fast", "slow"] and set(table["seeds"]) == {2}
    row = table[table["policy"] == "fast"].iloc[0]
    mean, std = fast["avg_jct_s"].mean(), fast["avg_jct_s"].std(ddof=1)
    assert row["avg_jct_s_mean"] == pytest.approx(mean)
    assert row["avg_jct_s_std"] == pytest.approx(std)


def test_static_runs_group_together(tmp_path: Path) -> None:
    specs = sweep.plan_runs(["fast"], [None], [0, 1], SMALL)
    assert [s.key.rsplit("__", 1)[0] for s in specs] == ["fast__jphnone__seed0",
                                                         "fast__jphnone__seed1"]
    sweep.run_sweep(specs, tmp_path, runner=fake_runner, progress=False, fmt="csv")
    table = sweep.aggregate(sweep.summarize_runs(sweep.load_results(tmp_path)))
    assert len(table) == 1 and math.isnan(table["jobs_per_hour"].iloc[0])
    assert table["seeds"].iloc[0] == 2


def test_trace_workload_builds_per_seed(tmp_path: Path) -> None:
    log = tmp_path / "cluster_log.csv"
    log.write_text(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
        "duration,queue\n"
        + "".join(f"{i},u,vc,1,1,1,COMPLETED,2020-04-01 00:{i:02d}:00,,,600,0\n"
                  for i in range(6)),
        encoding="utf-8")
    spec = WorkloadSpec(kind="trace", num_jobs=4, cluster=(("v100", 2),), trace_path=str(log),
                        trace_format="helios")
    inst = spec.build(seed=0, jobs_per_hour=None, round_s=120.0)
    assert [j.arrival for j in inst.jobs] == [0.0, 60.0, 120.0, 180.0]
    assert inst.params.round_s == 120.0
    faster = spec.build(seed=0, jobs_per_hour=120.0)
    assert [j.arrival for j in faster.jobs] == pytest.approx([0.0, 30.0, 60.0, 90.0])


def has_registry() -> bool:
    """True once the real policies are registered (fifo, srtf)."""
    try:
        from schedlab.policies.registry import get_policy

        get_policy("fifo")
        get_policy("srtf")
    except (ImportError, SchedlabError):
        return False
    return True


@pytest.mark.skipif(not has_registry(), reason="the policy registry is not written yet")
def test_real_simulations(tmp_path: Path) -> None:
    specs = sweep.plan_runs(["fifo", "srtf"], [6.0], [0], SMALL)
    report = sweep.run_sweep(specs, tmp_path, progress=False, fmt="csv")
    assert len(report.ran) == 2
    summary = sweep.summarize_runs(sweep.load_results(tmp_path))
    assert list(summary["finished"]) == [5.0, 5.0]
    assert (summary["utilization"].between(0.0, 1.0)).all()
    assert (summary["worst_rho"] > 0).all()
    assert not [f for f in files(tmp_path) if f.startswith(".")]


# ------------------------------------------------------------------------ command line


class GreedyFifo(Policy):
    """Test stand-in policy: jobs in arrival order, each on the first type with room."""

    def decide(self, state: ClusterState) -> list[Assignment]:
        self.decisions += 1
        free = dict(state.gpus)
        plan = []
        for job in state.active:
            for acc in free:
                if free[acc] >= job.scale_factor and job.throughput.get(acc, 0.0) > 0:
                    free[acc] -= job.scale_factor
                    plan.append(Assignment(job.id, acc))
                    break
        return plan


@pytest.fixture
def fake_policies() -> Iterator[None]:
    """Register ``testing.greedy`` (and ``testing.greedy2``) for one test."""
    from schedlab.policies import registry

    with registry.POLICIES.scoped():
        registry.register_policy("testing.greedy", GreedyFifo, "test stand-in")
        registry.register_policy("testing.greedy2", GreedyFifo, "test stand-in")
        yield


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


SMALL_ARGS = ("--jobs", "6", "--cluster", "2:2:2", "--jobs-per-hour", "4")


@pytest.mark.usefixtures("fake_policies")
def test_cli_simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "results.csv"
    code, out, err = cli(capsys, "simulate", "--policy", "testing.greedy", *SMALL_ARGS,
                         "--seeds", "0,1", "--out", str(out_file))
    assert code == 0, err
    assert "testing.greedy on Gavel-style jobs; 6 GPUs (v100 x2, p100 x2, k80 x2)" in out
    assert "mean ± std" in out and "6/6" in out
    results = pd.read_csv(out_file)
    assert len(results) == 12 and set(results["seed"]) == {0, 1}
    assert {"jct", "isolated_time_s", "run_gpus"} <= set(results.columns)


@pytest.mark.usefixtures("fake_policies")
def test_cli_compare_same_jobs_and_resume(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    args = ("compare", "--policies", "testing.greedy,testing.greedy2", *SMALL_ARGS,
            "--seeds", "0-1", "--workers", "2", "--runs-dir", str(runs))
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    lines = [line for line in out.splitlines() if "testing.greedy" in line]
    assert len(lines) == 3  # the title and one row per policy
    # Same policy class on the same job streams: identical rows after the name.
    first, second = (line.split("│")[2:] for line in lines[1:])
    assert first == second
    assert len(list(runs.iterdir())) == 4
    code, _, err = cli(capsys, *args)  # everything is there: nothing runs again
    assert code == 0 and "4 of 4 runs were already" in err


@pytest.mark.usefixtures("fake_policies")
def test_cli_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    code, _, err = cli(capsys, "compare", "--policies", "testing.greedy,testing.greedy2",
                       "--jobs", "6", "--cluster", "2:2:2", "--jobs-per-hour", "2,8",
                       "--plots", str(tmp_path))
    assert code == 0, err
    for name in ("jct_cdf.png", "jct_vs_load.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000


def helios_file(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "cluster_log.csv"
    path.write_text("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
                    "end_time,duration,queue\n" + "".join(r + "\n" for r in rows),
                    encoding="utf-8")
    return path


@pytest.mark.usefixtures("fake_policies")
def test_cli_trace_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = helios_file(tmp_path, [
        f"{i},u,vc,{1 + i % 2},1,1,COMPLETED,2020-04-01 00:{i:02d}:00,,,{600 * (i + 1)},0"
        for i in range(5)])
    code, out, err = cli(capsys, "simulate", "--policy", "testing.greedy", "--workload",
                         f"trace:{path}", "--cluster", "v100=2")
    assert code == 0, err
    assert "helios trace cluster_log.csv; 2 GPUs (v100 x2)" in out
    assert "trace" in out and "5/5" in out


@pytest.mark.usefixtures("fake_policies")
@pytest.mark.parametrize(("argv", "fragments"), [
    (("--policy", "nope"), ("--policy", "unknown policy 'nope'")),
    (("--policy", "testing.greedy", "--cluster", "36:x:36"),
     ("--cluster", "'x' is not a GPU count")),
    (("--policy", "testing.greedy", "--cluster", "36:36"), ("--cluster", "expected 3 counts")),
    (("--policy", "testing.greedy", "--workload", "slurm"),
     ("--workload", "expected 'gavel' or 'trace:FILE'")),
    (("--policy", "testing.greedy", "--workload", "trace:jobs.txt"),
     ("--trace-format", "cannot tell the format")),
    (("--policy", "testing.greedy", "--seeds", "0,x"), ("--seeds", "'x' is not a seed")),
    (("--policy", "testing.greedy", "--jobs-per-hour", "-3"), ("--jobs-per-hour",)),
    (("--policy", "testing.greedy", "--out", "r.txt"), ("--out", ".csv or .parquet")),
])
def test_cli_bad_input(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                       fragments: tuple[str, ...]) -> None:
    code, _, err = cli(capsys, "simulate", *argv)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.usefixtures("fake_policies")
@pytest.mark.parametrize(("rows", "fragment"), [
    ([], "cluster_log.csv: no usable jobs: the file has no jobs"),
    (["7,u,vc,1,1,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 02:00:00,"
      "2020-04-01 01:00:00,,0"],
     "cluster_log.csv: line 2: end_time 2020-04-01 01:00:00 before start_time "
     "2020-04-01 02:00:00"),
])
def test_cli_bad_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list[str],
                       fragment: str) -> None:
    path = helios_file(tmp_path, rows)
    code, _, err = cli(capsys, "compare", "--policies", "testing.greedy", "--workload",
                       f"trace:{path}")
    assert code == 2
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err


def test_cli_subprocess_exit_code(tmp_path: Path) -> None:
    path = helios_file(tmp_path, [])
    proc = subprocess.run(
        [sys.executable, "-m", "schedlab", "simulate", "--policy", "x", "--cluster", "1:y:1",
         "--workload", f"trace:{path}"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")


def test_process_pool_interrupt_keeps_no_partial_files(tmp_path: Path) -> None:
    specs = sweep.plan_runs(["interrupt"], [6.0], [0, 1, 2, 3], SMALL)
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(specs, tmp_path, workers=2, runner=fake_runner, progress=False,
                        fmt="csv")
    names = files(tmp_path)
    assert f"{specs[2].key}.csv" not in names
    assert not [f for f in names if f.startswith(".")]


def test_plot_errors(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from schedlab.analysis import plots

    table = pd.DataFrame({"policy": ["a"], "jobs_per_hour": [math.nan],
                          "avg_jct_s_mean": [3600.0]})
    with pytest.raises(InputError, match="no run has an arrival rate"):
        plots.plot_jct_vs_load(table, tmp_path / "x.png")
    with pytest.raises(InputError, match="lacks column"):
        plots.plot_jct_vs_load(table.drop(columns="avg_jct_s_mean"), tmp_path / "x.png")
    jobs = pd.DataFrame({"arrival": [0.0, 10.0], "finish": [3600.0, 7200.0]})
    with pytest.raises(InputError, match="PNG"):
        plots.plot_jct_cdf(jobs, tmp_path / "x.pdf")
    path = plots.plot_jct_cdf(jobs, tmp_path / "cdf.png")
    assert path.read_bytes().startswith(b"\x89PNG")
    assert files(tmp_path) == ["cdf.png"]
