"""Trace reading at scale, tested on small files: a malformed row fails in one line naming the
file, the line and the field, before anything is simulated; the rate is applied while
converting; the benchmark's Philly and Helios files carry the same jobs.

Every expected value is worked out by hand (comments say how).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.workloads.traces import (
    TraceJob,
    instance_from_trace,
    read_helios_jobs,
    read_philly_jobs,
    trace_jobs_to_instance,
)

ROOT = Path(__file__).resolve().parent.parent
HEADER = ("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
          "duration,queue")


def helios_rows(count: int) -> list[str]:
    """``count`` good rows: job i submitted at 00:00:00 + i s (i < 3600), 1 GPU, 60 s."""
    return [f"{i},u,vc,1,4,1,COMPLETED,2020-04-01 00:{i // 60:02d}:{i % 60:02d},,,60,0"
            for i in range(count)]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def philly_job(i: int, end: str = "2017-10-01 01:10:00") -> dict[str, Any]:
    return {"jobid": f"j{i}", "user": "u", "vc": "vc", "status": "Pass",
            "submitted_time": "2017-10-01 01:00:00",
            "attempts": [{"start_time": "2017-10-01 01:00:00", "end_time": end,
                          "detail": [{"ip": "m0", "gpus": ["gpu0"]}]}]}


# --------------------------------------------------------------- a malformed row, at once


def test_helios_bad_row_fails_in_one_line_before_simulating(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from schedlab.analysis import sweep

    def no_runs(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("runs were planned: the trace was not checked first")

    monkeypatch.setattr(sweep, "plan_runs", no_runs)
    rows = helios_rows(2000)
    rows[1499] = rows[1499].replace(",1,4,1,", ",x,4,1,", 1)  # data row 1500 = line 1501
    path = write_lines(tmp_path / "cluster_log.csv", [HEADER, *rows])
    out = tmp_path / "runs.csv"
    code = main(["simulate", "--workload", f"trace:{path}", "--policy", "fifo",
                 "--out", str(out)])
    assert code == 2
    assert capsys.readouterr().err == f"error: {path}: line 1501: gpu_num 'x' is not a number\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster_log.csv"]  # nothing written


def test_helios_end_before_start_deep_in_the_file(tmp_path: Path) -> None:
    rows = helios_rows(3000)
    # data row 2345 (line 2346): job 2344 submitted 00:39:04; it ends an hour before it starts
    rows[2344] = ("2344,u,vc,1,4,1,COMPLETED,2020-04-01 00:39:04,2020-04-01 00:40:00,"
                  "2020-04-01 00:30:00,,0")
    path = write_lines(tmp_path / "cluster_log.csv", [HEADER, *rows])
    with pytest.raises(InputError) as err:
        read_helios_jobs(path)
    assert str(err.value) == (f"{path}: line 2346: end_time 2020-04-01 00:30:00 before "
                              "start_time 2020-04-01 00:40:00")


def test_philly_bad_job_names_its_line_when_the_file_has_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = [philly_job(i) for i in range(6)]
    jobs[3] = philly_job(3, end="2017-10-01 00:00:00")  # ends before it starts
    # one job per line after the opening "[": job i on line i + 2, so job 3 on line 5
    lines = "[\n" + ",\n".join(json.dumps(job) for job in jobs) + "\n]\n"
    per_line = tmp_path / "cluster_job_log"
    per_line.write_text(lines, encoding="utf-8")
    reason = "end_time 2017-10-01 00:00:00 before start_time 2017-10-01 01:00:00"
    with pytest.raises(InputError) as err:
        read_philly_jobs(per_line)
    assert str(err.value) == f"{per_line}: line 5: [3] (jobid j3).attempts[0]: {reason}"
    # one line: the list index (and the job id) says where
    one_line = tmp_path / "one_line" / "cluster_job_log.json"
    one_line.parent.mkdir()
    one_line.write_text(json.dumps(jobs), encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_philly_jobs(one_line)
    assert str(err.value) == f"{one_line}: [3] (jobid j3).attempts[0]: {reason}"
    assert main(["simulate", "--workload", f"trace:{per_line}", "--policy", "fifo"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_philly_line_is_left_out_when_jobid_keys_do_not_line_up(tmp_path: Path) -> None:
    # the first job's user is the string "jobid": the 4th '"jobid"' of the text is job 2's
    jobs = [philly_job(i) for i in range(4)]
    jobs[0]["user"] = "jobid"
    jobs[3] = philly_job(3, end="2017-10-01 00:00:00")
    path = tmp_path / "cluster_job_log"
    path.write_text("[\n" + ",\n".join(json.dumps(job) for job in jobs) + "\n]\n",
                    encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_philly_jobs(path)
    assert str(err.value).startswith(f"{path}: [3] (jobid j3).attempts[0]: end_time")


# ------------------------------------------------------------------------- time notations


def test_wall_clock_seconds_and_time_zones_agree(tmp_path: Path) -> None:
    rows = [
        # start 02:00 at UTC+2 = 00:00 UTC; end 01:00 UTC: 3600 s (end - start)
        "a,u,vc,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 02:00:00+02:00,"
        "2020-04-01 01:00:00,,0",
        # seconds: 2020-04-01 is day 50 x 365 + 12 leap days + 31 + 29 + 31 = 18353 of the
        # epoch, 18353 x 86400 = 1585699200; + 600 s
        "b,u,vc,1,4,1,COMPLETED,1585699800,,,60,0",
        # surrounding blanks: 20 minutes after a
        "c,u,vc,1,4,1,COMPLETED, 2020-04-01 00:20:00 ,,,60,0",
    ]
    jobs = read_helios_jobs(write_lines(tmp_path / "cluster_log.csv", [HEADER, *rows]))
    assert [j.duration_s for j in jobs] == [3600.0, 60.0, 60.0]
    assert [j.submit_s - jobs[0].submit_s for j in jobs] == [0.0, 600.0, 1200.0]
    assert jobs[0].submit_s == 1585699200.0


# ------------------------------------------------------------------------ rate, converting


def test_rate_applied_while_converting_equals_rescaling(tmp_path: Path) -> None:
    # arrivals 0, 100, 400 s: 3 jobs over 400 s; at 36 jobs/h the mean gap is 100 s, so the
    # factor is (3 - 1) / 400 / (36 / 3600) = 0.5: arrivals 0, 50, 200
    jobs = [TraceJob(id=f"j{i}", submit_s=5000.0 + s, duration_s=60.0, gpus=1, status="ok")
            for i, s in enumerate((0.0, 100.0, 400.0))]
    inst = trace_jobs_to_instance(jobs, jobs_per_hour=36.0)
    assert [j.arrival for j in inst.jobs] == [0.0, 50.0, 200.0]
    rows = ["j0,u,vc,1,4,1,COMPLETED,2020-04-01 00:00:00,,,60,0",
            "j1,u,vc,1,4,1,COMPLETED,2020-04-01 00:01:40,,,60,0",
            "j2,u,vc,1,4,1,COMPLETED,2020-04-01 00:06:40,,,60,0"]
    path = write_lines(tmp_path / "cluster_log.csv", [HEADER, *rows])
    read = instance_from_trace(path, "helios", jobs_per_hour=36.0)
    assert [j.arrival for j in read.jobs] == [0.0, 50.0, 200.0]
    with pytest.raises(InputError, match="jobs_per_hour must be positive"):
        instance_from_trace(tmp_path / "missing.csv", "helios", jobs_per_hour=-1.0)


# ------------------------------------------------------------ the benchmark's trace files


def benchmark_module() -> ModuleType:
    name = "_simulator_scale_under_test"
    spec = importlib.util.spec_from_file_location(
        name, ROOT / "benchmarks" / "simulator_scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def test_benchmark_writes_the_generated_stream_in_both_formats(tmp_path: Path) -> None:
    bench = benchmark_module()
    stream = bench.generated(1000).jobs
    bench.write_philly(tmp_path / "cluster_job_log.json", 1000)
    bench.write_helios(tmp_path / "cluster_log.csv", 1000)
    philly = read_philly_jobs(tmp_path / "cluster_job_log.json")
    helios = read_helios_jobs(tmp_path / "cluster_log.csv")
    # what a whole-second file can say about each generated job: submitted at its arrival
    # rounded down (the first arrives at 0 s), on s GPUs, for total_steps / T[v100] rounded
    expected = [(job.id, float(math.floor(job.arrival)), job.scale_factor,
                 float(max(round(job.total_steps / job.throughput["v100"]), 1)))
                for job in stream]
    for read in (philly, helios):
        assert [(j.id, j.submit_s - read[0].submit_s, j.gpus, j.duration_s)
                for j in read] == expected
    cluster = bench.scaled_cluster(1000)
    assert instance_from_trace(tmp_path / "cluster_job_log.json", "philly", cluster).jobs == \
        instance_from_trace(tmp_path / "cluster_log.csv", "helios", cluster).jobs
