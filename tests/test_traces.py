"""Trace readers: small Philly / Helios / PAI files written in their public formats.

Every expected value is worked out by hand from the sample rows.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from schedlab.errors import InputError
from schedlab.workloads import load_gavel_throughputs
from schedlab.workloads.traces import (
    TraceJob,
    instance_from_trace,
    read_helios_jobs,
    read_pai_jobs,
    read_philly_jobs,
    rescale_arrivals,
    scale_factor_for,
    trace_jobs_to_instance,
)

TABLE = load_gavel_throughputs()


def _gpus(n: int, prefix: str = "gpu") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def _attempt(start: str | None, end: str | None, *machines: int) -> dict[str, Any]:
    return {"start_time": start, "end_time": end,
            "detail": [{"ip": f"m{i}", "gpus": _gpus(n)} for i, n in enumerate(machines)]}


PHILLY: list[dict[str, Any]] = [
    {   # two attempts of 74 s and 30 s on 8 GPUs (one machine): 104 s, s = 8
        "status": "Pass", "vc": "ee9e8c", "jobid": "application_1", "user": "ce2f4c",
        "submitted_time": "2017-10-07 01:11:39",
        "attempts": [_attempt("2017-10-07 01:12:09", "2017-10-07 01:13:23", 8),
                     _attempt("2017-10-07 01:13:30", "2017-10-07 01:14:00", 8)],
    },
    {   # killed: kept only with keep_failed; 3 GPUs -> s = 4; 600 s
        "status": "Killed", "vc": "ee9e8c", "jobid": "application_2", "user": "u2",
        "submitted_time": "2017-10-07 01:12:39",
        "attempts": [_attempt("2017-10-07 01:20:00", "2017-10-07 01:30:00", 3)],
    },
    {   # never scheduled: skipped
        "status": "Pass", "vc": "ee9e8c", "jobid": "application_3", "user": "u3",
        "submitted_time": "2017-10-07 01:13:00", "attempts": [],
    },
    {   # still running when the log was taken: skipped
        "status": "Pass", "vc": "ee9e8c", "jobid": "application_4", "user": "u4",
        "submitted_time": "2017-10-07 01:14:00",
        "attempts": [_attempt("2017-10-07 01:15:00", None, 1)],
    },
    {   # 2 machines x 2 GPUs in its first attempt -> 4 GPUs; 1 h; arrives 2 min after job 1
        "status": "Pass", "vc": "ee9e8c", "jobid": "application_5", "user": "u5",
        "submitted_time": "2017-10-07 01:13:39",
        "attempts": [_attempt("2017-10-07 02:00:00", "2017-10-07 03:00:00", 2, 2)],
    },
]


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


# -------------------------------------------------------------------------------- Philly


def test_philly_reads_durations_gpus_and_skips(tmp_path: Path) -> None:
    jobs = read_philly_jobs(write_json(tmp_path / "cluster_job_log", PHILLY))
    assert [j.id for j in jobs] == ["application_1", "application_5"]
    first, fifth = jobs
    assert first.duration_s == pytest.approx(74 + 30)
    assert first.gpus == 8
    assert first.user == "ce2f4c"
    assert fifth.duration_s == pytest.approx(3600)
    assert fifth.gpus == 4
    assert fifth.submit_s - first.submit_s == pytest.approx(120)


def test_philly_keep_failed(tmp_path: Path) -> None:
    jobs = read_philly_jobs(write_json(tmp_path / "log.json", PHILLY), keep_failed=True)
    killed = {j.id: j for j in jobs}["application_2"]
    assert killed.duration_s == pytest.approx(600)
    assert killed.gpus == 3
    assert killed.status == "Killed"


def test_philly_to_instance(tmp_path: Path) -> None:
    inst = instance_from_trace(write_json(tmp_path / "log.json", PHILLY), "philly",
                               {"v100": 8, "k80": 8}, seed=3, keep_failed=True)
    by_id = {j.id: j for j in inst.jobs}
    assert list(by_id) == ["application_1", "application_2", "application_5"]  # by submit
    assert [by_id[k].arrival for k in by_id] == pytest.approx([0.0, 60.0, 120.0])
    assert [by_id[k].scale_factor for k in by_id] == [8, 4, 4]
    for job, duration in zip(by_id.values(), (104.0, 600.0, 3600.0), strict=True):
        measured = TABLE.throughput(job.job_type or "", job.scale_factor)
        assert job.total_steps == max(1, round(duration * measured["v100"]))  # whole steps
        assert job.throughput == {k: measured[k] for k in ("v100", "k80")}
    assert set(inst.cluster.accelerators) == {"v100", "k80"}
    # The job-type draw is seeded: same seed, same types; the arrival order does not change.
    again = instance_from_trace(tmp_path / "log.json", "philly", {"v100": 8, "k80": 8},
                                seed=3, keep_failed=True)
    assert [j.job_type for j in again.jobs] == [j.job_type for j in inst.jobs]


def test_philly_gzip_and_num_jobs(tmp_path: Path) -> None:
    path = tmp_path / "cluster_job_log.gz"
    path.write_bytes(gzip.compress(json.dumps(PHILLY).encode()))
    inst = instance_from_trace(path, "philly", num_jobs=1)
    assert [j.id for j in inst.jobs] == ["application_1"]


def test_philly_end_before_start(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(PHILLY))
    bad[4]["attempts"][0]["end_time"] = "2017-10-07 01:59:00"
    with pytest.raises(InputError) as err:
        read_philly_jobs(write_json(tmp_path / "log.json", bad))
    message = str(err.value)
    assert "log.json" in message and "[4] (jobid application_5).attempts[0]" in message
    assert "end_time 2017-10-07 01:59:00 before start_time 2017-10-07 02:00:00" in message


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "empty"),
    ("[]", "no usable jobs: the file has no jobs"),
    ("{\"a\": 1}", "JSON list"),
    ("[{\"jobid\": \"x\", \"status\": \"Pass\", \"submitted_time\": \"yesterday\"}]",
     "submitted_time 'yesterday' is neither seconds nor"),
    ("[1, 2", "line 1 column 6: invalid JSON"),
])
def test_philly_bad_files(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "log.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=fragment):
        read_philly_jobs(path)


def test_philly_all_skipped_says_why(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"every job was skipped \(1 killed"):
        read_philly_jobs(write_json(tmp_path / "log.json", [PHILLY[1]]))


# -------------------------------------------------------------------------------- Helios

HELIOS_HEADER = ("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
                 "end_time,duration,queue")
HELIOS_ROWS = [
    # 1 GPU, 1 h, completed
    "1001,uA,vc1,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:10,"
    "2020-04-01 01:00:10,3600,10",
    # CPU-only: skipped
    "1002,uB,vc1,0,8,1,COMPLETED,2020-04-01 00:01:00,2020-04-01 00:01:00,"
    "2020-04-01 00:02:00,60,0",
    # cancelled: kept only with keep_failed
    "1003,uC,vc2,2,8,1,CANCELLED,2020-04-01 00:02:00,2020-04-01 00:03:00,"
    "2020-04-01 00:13:00,600,60",
    # 16 GPUs on 2 nodes -> s = 8 (the cap); 2 h; empty duration: end - start
    "1004,uD,vc2,16,64,2,COMPLETED,2020-04-01 00:30:00,2020-04-01 01:00:00,"
    "2020-04-01 03:00:00,,1800",
    # 6 GPUs -> s = 8
    "1005,uE,vc3,6,24,1,COMPLETED,2020-04-01 00:45:00,2020-04-01 00:45:00,"
    "2020-04-01 00:55:00,600,0",
]


def write_helios(path: Path, rows: list[str], header: str = HELIOS_HEADER) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_helios_reads_and_skips(tmp_path: Path) -> None:
    jobs = read_helios_jobs(write_helios(tmp_path / "cluster_log.csv", HELIOS_ROWS))
    assert [(j.id, j.gpus, j.duration_s) for j in jobs] == [
        ("1001", 1, 3600.0), ("1004", 16, 7200.0), ("1005", 6, 600.0)]
    assert jobs[1].submit_s - jobs[0].submit_s == 1800.0
    with_failed = read_helios_jobs(tmp_path / "cluster_log.csv", keep_failed=True)
    assert [j.id for j in with_failed] == ["1001", "1003", "1004", "1005"]


def test_helios_to_instance_caps_scale_factor(tmp_path: Path) -> None:
    path = write_helios(tmp_path / "cluster_log.csv", HELIOS_ROWS)
    inst = instance_from_trace(path, "helios")
    assert [(j.id, j.arrival, j.scale_factor) for j in inst.jobs] == [
        ("1001", 0.0, 1), ("1004", 1800.0, 8), ("1005", 2700.0, 8)]
    assert [j.user for j in inst.jobs] == ["uA", "uD", "uE"]
    # A smaller cap, and a cluster too small for 8-GPU gangs, lower the scale factor.
    capped = instance_from_trace(path, "helios", {"v100": 4})
    assert [j.scale_factor for j in capped.jobs] == [1, 4, 4]


def test_helios_extra_columns_in_any_order(tmp_path: Path) -> None:
    header = "jobname,state,job_id,submit_time,gpu_num,duration,user"
    rows = ["train,COMPLETED,7,2020-05-01 10:00:00,2,120,u1"]
    (job,) = read_helios_jobs(write_helios(tmp_path / "log.csv", rows, header))
    assert (job.id, job.gpus, job.duration_s, job.user) == ("7", 2, 120.0, "u1")


def test_helios_end_before_start_names_line_and_fields(tmp_path: Path) -> None:
    rows = [*HELIOS_ROWS[:2],
            "1006,uF,vc1,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 11:00:00,"
            "2020-04-01 10:00:00,,0"]
    path = write_helios(tmp_path / "cluster_log.csv", rows)
    with pytest.raises(InputError) as err:
        read_helios_jobs(path)
    assert str(err.value) == (
        f"{path}: line 4: end_time 2020-04-01 10:00:00 before start_time 2020-04-01 11:00:00")


@pytest.mark.parametrize(("rows", "fragment"), [
    (["1,u,vc,two,1,1,COMPLETED,2020-04-01 00:00:00,,,60,0"], "line 2: gpu_num 'two' is not"),
    (["1,u,vc,1,1,1,COMPLETED,2020-04-01 00:00:00,,,60"], "line 2: 11 fields, the header has 12"),
    (["1,u,vc,1,1,1,COMPLETED,2020-04-01 00:00:00,,,-5,0"], "duration must be a number >= 0"),
    (["1,u,vc,1,1,1,COMPLETED,2020-04-01 00:00:00,,,60,0",
      "1,u,vc,1,1,1,COMPLETED,2020-04-01 00:00:00,,,60,0"], "line 3: duplicate job_id '1'"),
    ([], "no usable jobs: the file has no jobs"),
    (["1,u,vc,0,1,1,COMPLETED,2020-04-01 00:00:00,,,60,0"], r"every job was skipped \(1 CPU"),
])
def test_helios_bad_rows(tmp_path: Path, rows: list[str], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        read_helios_jobs(write_helios(tmp_path / "cluster_log.csv", rows))


def test_helios_missing_column_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing column\(s\) gpu_num"):
        read_helios_jobs(write_helios(tmp_path / "a.csv", [], "job_id,state,submit_time"))
    empty = tmp_path / "b.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="file is empty"):
        read_helios_jobs(empty)
    with pytest.raises(InputError, match="no such file"):
        read_helios_jobs(tmp_path / "missing.csv")


# ----------------------------------------------------------------------------------- PAI

PAI_JOBS = [
    # submitted at 100 s; a ps task (no GPU) and 2 workers at 50 % each -> 1 GPU; runs 110..510
    "jobA,instA,u1,Terminated,100.0,600.0",
    # 8 GPUs (plan_gpu 800); submitted at 200 s; runs 250..4250
    "jobB,instB,u2,Terminated,200.0,4300.0",
    # failed: kept only with keep_failed; 3 x 100 % -> 3 GPUs -> s 4; runs 400..700
    "jobC,instC,u3,Failed,300.0,700.0",
    # still running: never kept
    "jobD,instD,u4,Running,350.0,",
    # CPU-only
    "jobE,instE,u5,Terminated,360.0,400.0",
]
PAI_TASKS = [
    "jobA,ps,1.0,Terminated,110.0,510.0,600.0,29.3,,",
    "jobA,worker,2.0,Terminated,120.0,500.0,400.0,20.0,50.0,T4",
    "jobB,tensorflow,1.0,Terminated,250.0,4250.0,1200.0,100.0,800.0,V100",
    "jobC,worker,3.0,Failed,400.0,700.0,600.0,10.0,100.0,P100",
    "jobD,worker,1.0,Running,360.0,,600.0,10.0,100.0,MISC",
    "jobE,worker,1.0,Terminated,360.0,390.0,600.0,10.0,0.0,",
]


def write_pai(folder: Path, jobs: list[str], tasks: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pai_job_table.csv").write_text("\n".join(jobs) + "\n", encoding="utf-8")
    (folder / "pai_task_table.csv").write_text("\n".join(tasks) + "\n", encoding="utf-8")
    return folder / "pai_job_table.csv"


def test_pai_reads_gpus_and_durations(tmp_path: Path) -> None:
    jobs = read_pai_jobs(write_pai(tmp_path, PAI_JOBS, PAI_TASKS))
    assert [(j.id, j.submit_s, j.gpus, j.duration_s) for j in jobs] == [
        ("jobA", 100.0, 1, 400.0), ("jobB", 200.0, 8, 4000.0)]
    with_failed = read_pai_jobs(tmp_path, keep_failed=True)  # the folder works too
    assert [(j.id, j.gpus, j.duration_s) for j in with_failed][-1] == ("jobC", 3, 300.0)


def test_pai_to_instance(tmp_path: Path) -> None:
    path = write_pai(tmp_path, PAI_JOBS, PAI_TASKS)
    inst = instance_from_trace(path, "pai", keep_failed=True)
    assert [(j.id, j.arrival, j.scale_factor) for j in inst.jobs] == [
        ("jobA", 0.0, 1), ("jobB", 100.0, 8), ("jobC", 200.0, 4)]


def test_pai_header_row_is_tolerated_and_task_table_required(tmp_path: Path) -> None:
    header = "job_name,inst_id,user,status,start_time,end_time"
    path = write_pai(tmp_path / "a", [header, *PAI_JOBS], PAI_TASKS)
    assert len(read_pai_jobs(path)) == 2
    lonely = tmp_path / "b" / "pai_job_table.csv"
    lonely.parent.mkdir()
    lonely.write_text(PAI_JOBS[0] + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="also needs the task table"):
        read_pai_jobs(lonely)


@pytest.mark.parametrize(("jobs", "tasks", "fragment"), [
    (PAI_JOBS, ["jobA,worker,1.0,Terminated,500.0,100.0,600.0,10.0,100.0,T4"],
     "pai_task_table.csv: line 1: end_time 100.0 before start_time 500.0"),
    (["jobA,instA,u1,Terminated,100.0,50.0"], PAI_TASKS,
     "pai_job_table.csv: line 1: end_time 50.0 before start_time 100.0"),
    (["jobA,instA,u1,Terminated,100.0"], PAI_TASKS, "line 1: 5 fields, expected 6"),
    (PAI_JOBS, ["jobA,worker,1.0,Terminated,1,2,600.0,10.0,lots,T4"],
     "line 1: plan_gpu 'lots' is not a number"),
    ([*PAI_JOBS, PAI_JOBS[0]], PAI_TASKS, "line 6: duplicate job_name 'jobA' .also line 1."),
    (["jobD,instD,u4,Running,350.0,"], PAI_TASKS, r"every job was skipped \(1 running"),
])
def test_pai_bad_rows(tmp_path: Path, jobs: list[str], tasks: list[str], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        read_pai_jobs(write_pai(tmp_path, jobs, tasks))


# ------------------------------------------------------------------------- conversions


@pytest.mark.parametrize(("gpus", "cap", "expected"), [
    (1, 8, 1), (2, 8, 2), (3, 8, 4), (5, 8, 8), (8, 8, 8), (64, 8, 8), (3, 2, 2)])
def test_scale_factor_for(gpus: int, cap: int, expected: int) -> None:
    assert scale_factor_for(gpus, cap) == expected


def test_rescale_arrivals_hits_the_rate() -> None:
    jobs = [TraceJob(id=str(i), submit_s=1000.0 + 600.0 * i, duration_s=60.0, gpus=1,
                     status="ok") for i in range(5)]
    inst = trace_jobs_to_instance(jobs)
    assert [j.arrival for j in inst.jobs] == [0.0, 600.0, 1200.0, 1800.0, 2400.0]  # 6 jobs/h
    faster = rescale_arrivals(inst, 12.0)
    assert [j.arrival for j in faster.jobs] == pytest.approx([0.0, 300.0, 600.0, 900.0, 1200.0])
    with pytest.raises(InputError, match="jobs_per_hour must be positive"):
        rescale_arrivals(inst, 0.0)


def test_conversion_errors() -> None:
    job = TraceJob(id="a", submit_s=0.0, duration_s=60.0, gpus=1, status="ok")
    with pytest.raises(InputError, match="the trace has no jobs"):
        trace_jobs_to_instance([])
    with pytest.raises(InputError, match="no measured throughputs for accelerator 'a100'"):
        trace_jobs_to_instance([job], {"a100": 8})
    with pytest.raises(InputError, match="unknown trace format 'slurm'"):
        instance_from_trace("x", "slurm")
