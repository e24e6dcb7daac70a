"""Shockwave's ``.trace`` format: seed 25 with Shockwave's throughputs is its published trace
byte for byte; the reader gives the generator's instance back; bad traces and throughput files
through the command line exit 2 with one error line naming the file and the field.

The published trace is copied in ``tests/data/shockwave/`` (SOURCE.md beside it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.instance import instance_from_dict
from schedlab.workloads.shockwave import generate_shockwave_instance
from schedlab.workloads.shockwave_trace import (
    TRACE_COLUMNS,
    format_shockwave_trace,
    read_shockwave_trace,
    run_time_s,
    write_shockwave_trace,
)
from schedlab.workloads.throughputs import THROUGHPUT_TABLE_SCHEMA, load_throughputs

DATA = Path(__file__).resolve().parent / "data" / "shockwave"
PUBLISHED = DATA / "120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace"


def published_lines() -> list[str]:
    return PUBLISHED.read_text(encoding="utf-8").splitlines(keepends=True)


# ----------------------------------------------------------------------- the published trace


def test_seed_25_with_shockwave_tacc_is_the_published_trace_byte_for_byte() -> None:
    instance = generate_shockwave_instance(120, seed=25, throughputs="shockwave-tacc")
    assert format_shockwave_trace(instance).encode("utf-8") == PUBLISHED.read_bytes()


def test_gavel_throughputs_keep_the_draws_but_not_the_steps() -> None:
    """With Gavel's table the job types, scale factors, modes, durations and arrivals are the
    published ones; the steps (column 6) are not."""
    ours = format_shockwave_trace(generate_shockwave_instance(120, seed=25)).splitlines()
    theirs = [line.rstrip("\n") for line in published_lines()]
    kept = [0, 6, 7, 10, 11]  # job_type, scale_factor, mode, duration, arrival_time
    for a, b in zip(ours, theirs, strict=True):
        assert [a.split("\t")[k] for k in kept] == [b.split("\t")[k] for k in kept]
    assert sum(a.split("\t")[5] != b.split("\t")[5]
               for a, b in zip(ours, theirs, strict=True)) > 100


def test_reading_the_published_trace_gives_the_generators_instance() -> None:
    generated = generate_shockwave_instance(120, seed=25, throughputs="shockwave-tacc")
    read = read_shockwave_trace(PUBLISHED)
    assert read.to_dict()["jobs"] == generated.to_dict()["jobs"]
    assert read.cluster == generated.cluster and read.params == generated.params
    assert "shockwave-tacc" in (read.description or "")


def test_write_then_read_round_trips_with_gavels_table(tmp_path: Path) -> None:
    instance = generate_shockwave_instance(40, {"v100": 8}, seed=3)
    path = tmp_path / "ours.trace"
    write_shockwave_trace(instance, path)
    back = read_shockwave_trace(path, {"v100": 8}, throughputs="gavel")
    assert back.to_dict()["jobs"] == instance.to_dict()["jobs"]
    assert format_shockwave_trace(back) == path.read_text(encoding="utf-8")


def test_first_jobs_and_cluster() -> None:
    read = read_shockwave_trace(PUBLISHED, {"v100": 4, "p100": 2}, num_jobs=5)
    assert [job.id for job in read.jobs] == ["0", "1", "2", "3", "4"]
    assert set(read.jobs[0].throughput) == {"v100", "p100"}
    assert read.cluster.total_gpus == 6


def test_run_time_is_the_generators_rule_backwards() -> None:
    # LM (batch size 10) on one V100 at TACC: 1418 s gave 134583 steps
    assert run_time_s(134583, 94.91094148) == 1418
    assert int(1418 * 94.91094148) == 134583


def test_writer_refuses_a_job_it_cannot_write() -> None:
    other = instance_from_dict({"name": "x", "cluster": {"accelerators": {"v100": {"count": 1}}},
                                "jobs": [{"id": "a", "job_type": "A3C", "total_steps": 10,
                                          "throughput": {"v100": 2.0}}]})
    with pytest.raises(InputError) as info:
        format_shockwave_trace(other)
    assert info.value.field == "jobs[0].job_type"


# ----------------------------------------------------------------------------- command line


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == ""
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: ")
    return lines[0]


def test_cli_simulates_a_shockwave_trace(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    out_file = tmp_path / "runs.csv"
    code = main(["simulate", "--workload", f"trace:{PUBLISHED}", "--jobs", "6",
                 "--policy", "fifo", "--quiet", "--out", str(out_file)])
    capsys.readouterr()
    assert code == 0
    runs = pd.read_csv(out_file)
    rows = [line.split("\t") for line in published_lines()[:6]]
    assert list(runs["job_type"]) == [r[0] for r in rows]
    assert list(runs["arrival"]) == [float(r[11]) for r in rows]


def _bad_trace(tmp_path: Path, line: int, column: str, value: str) -> Path:
    lines = published_lines()[:5]
    fields = lines[line - 1].rstrip("\n").split("\t")
    if column == "*":
        fields = fields[:-1]
    else:
        fields[TRACE_COLUMNS.index(column)] = value
    lines[line - 1] = "\t".join(fields) + "\n"
    path = tmp_path / "bad.trace"
    path.write_text("".join(lines), encoding="utf-8")
    return path


BAD_ROWS = [
    ("unknown model", 3, "job_type", "BERT (batch size 32)", "line 3: job_type",
     "unknown model 'BERT'"),
    ("unknown initial batch size", 2, "job_type", "ResNet-18 (batch size 48)",
     "line 2: job_type", "not 48"),
    ("not a job type", 4, "job_type", "ResNet-18", "line 4: job_type", "batch size"),
    ("unknown mode", 1, "mode", "elastic", "line 1: mode", "unknown mode 'elastic'"),
    ("zero steps", 5, "total_steps", "0", "line 5: total_steps", "must be >= 1"),
    ("steps not a number", 2, "total_steps", "many", "line 2: total_steps", "integer"),
    ("negative arrival", 2, "arrival_time", "-4", "line 2: arrival_time", "must be >= 0"),
    ("a field missing", 3, "*", "", "line 3", "11 tab-separated fields, expected 12"),
]


@pytest.mark.parametrize(("name", "line", "column", "value", "field", "words"), BAD_ROWS,
                         ids=[case[0] for case in BAD_ROWS])
def test_cli_bad_trace_row_exits_2_with_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, line: int, column: str,
        value: str, field: str, words: str) -> None:
    path = _bad_trace(tmp_path, line, column, value)
    code = main(["simulate", "--workload", f"trace:{path}", "--policy", "fifo", "--quiet"])
    message = _one_error_line(capsys)
    assert code == 2
    assert message.startswith(f"error: {path}: {field}: "), message
    assert words in message, message


def _tacc_without(job_type: str) -> dict[str, object]:
    """The shipped shockwave-tacc document without ``job_type``."""
    from importlib import resources

    text = resources.files("schedlab").joinpath(
        "data", "shockwave", "tacc_throughputs.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    del doc["throughputs"][job_type]
    return doc


def _as_gavel_format(doc: dict[str, object]) -> dict[str, dict[str, dict[str, float]]]:
    """Gavel's raw layout of a throughput-table document (job-alone entries only)."""
    raw: dict[str, dict[str, dict[str, float]]] = {}
    throughputs = doc["throughputs"]
    assert isinstance(throughputs, dict)
    for job_type, by_sf in throughputs.items():
        for sf, by_acc in by_sf.items():
            for acc, value in by_acc.items():
                raw.setdefault(acc, {})[f"('{job_type}', {sf})"] = {"null": value}
    return raw


@pytest.mark.parametrize("layout", ["schedlab", "gavel"])
def test_cli_throughput_file_missing_a_job_type_the_trace_needs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str) -> None:
    doc = _tacc_without("LM (batch size 10)")  # the published trace's first job
    table = tmp_path / "throughputs.json"
    table.write_text(json.dumps(doc if layout == "schedlab" else _as_gavel_format(doc)))
    code = main(["simulate", "--workload", f"trace:{PUBLISHED}", "--throughputs", str(table),
                 "--policy", "fifo", "--quiet"])
    message = _one_error_line(capsys)
    assert code == 2
    assert message.startswith(f"error: {table}: throughputs['LM (batch size 10)']: "), message
    assert "job type not in the table" in message and f"line 1 of {PUBLISHED.name}" in message


def test_cli_generated_workload_with_a_throughput_file_missing_a_job_type(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a table without the job type of seed 0's first job
    first = generate_shockwave_instance(1, seed=0, throughputs="shockwave-tacc").jobs[0]
    assert first.job_type is not None
    table = tmp_path / "throughputs.json"
    table.write_text(json.dumps(_tacc_without(first.job_type)))
    code = main(["simulate", "--workload", "shockwave", "--throughputs", str(table),
                 "--jobs", "3", "--policy", "fifo", "--quiet"])
    message = _one_error_line(capsys)
    assert code == 2
    assert message.startswith(f"error: {table}: throughputs[{first.job_type!r}]: "), message
    assert "generated job 0" in message


@pytest.mark.parametrize(("argv", "field"), [
    (["--workload", "shockwave", "--throughputs", "tacc"], "--throughputs"),
    (["--workload", "gavel", "--throughputs", "gavel"], "--throughputs"),
    (["--workload", f"trace:{PUBLISHED}", "--keep-failed"], "--keep-failed"),
])
def test_cli_bad_throughputs_option_exits_2(capsys: pytest.CaptureFixture[str],
                                            argv: list[str], field: str) -> None:
    code = main(["simulate", *argv, "--policy", "fifo", "--quiet"])
    message = _one_error_line(capsys)
    assert code == 2 and message.startswith(f"error: {field}: "), message


def test_cli_malformed_throughput_file_names_the_entry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "throughputs.json"
    table.write_text(json.dumps({"schema": THROUGHPUT_TABLE_SCHEMA, "accelerators": ["v100"],
                                 "throughputs": {"LM (batch size 10)": {"1": {"v100": -3}}}}))
    code = main(["simulate", "--workload", "shockwave", "--throughputs", str(table),
                 "--policy", "fifo", "--quiet"])
    message = _one_error_line(capsys)
    assert code == 2
    assert message.startswith(f"error: {table}: throughputs['LM (batch size 10)'][1].v100: ")


def test_the_shipped_table_covers_every_job_the_generator_draws() -> None:
    """Every Shockwave template and every batch size its schedule can reach, on 1, 2, 4 and 8
    GPUs, has a V100 throughput > 0 in shockwave-tacc: no substitution, ever."""
    from schedlab.workloads.shockwave_adaptation import (
        ADAPTATIONS,
        DISTRIBUTED_MODELS,
        JOB_TEMPLATES,
        usable_batch_sizes,
    )

    table = load_throughputs("shockwave-tacc")
    for model, b0 in JOB_TEMPLATES:
        for sf in (1, 2, 4, 8) if model in DISTRIBUTED_MODELS else (1,):
            for mode in ADAPTATIONS:
                for b in usable_batch_sizes(model, b0, sf, mode):
                    job_type = f"{model} (batch size {b})"
                    assert table.throughput(job_type, sf)["v100"] > 0, (job_type, sf)
