"""Named throughput sources (``gavel``, ``shockwave-tacc``), throughput files in schedlab's
and Gavel's layouts, and the generator's choice of source.

Expected numbers are Shockwave's ``scheduler/tacc_throughputs.json`` entries, read off that
file by hand (its ``"null"`` values).
"""

from __future__ import annotations

import json
import math
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from schedlab.errors import InputError, UnknownNameError
from schedlab.workloads.shockwave import draw_shockwave_jobs, generate_shockwave_instance
from schedlab.workloads.throughput_files import (
    document_from_gavel_format,
    read_throughput_file,
    resolve_throughputs,
)
from schedlab.workloads.throughputs import (
    THROUGHPUT_SOURCES,
    load_gavel_throughputs,
    load_throughputs,
)

ROOT = Path(__file__).resolve().parent.parent


def test_named_sources_and_the_gavel_loader() -> None:
    assert set(THROUGHPUT_SOURCES) == {"gavel", "shockwave-tacc"}
    assert load_gavel_throughputs() is load_throughputs("gavel")
    assert load_throughputs("gavel").source == "gavel"
    assert load_throughputs("shockwave-tacc").source == "shockwave-tacc"


def test_unknown_source_names_the_field() -> None:
    with pytest.raises(UnknownNameError) as info:
        load_throughputs("tacc")
    assert info.value.field == "throughputs" and "shockwave-tacc" in info.value.reason
    with pytest.raises(UnknownNameError) as info:
        resolve_throughputs("wisr")
    assert info.value.field == "throughputs"


def test_shockwave_tacc_holds_shockwaves_numbers() -> None:
    table = load_throughputs("shockwave-tacc")
    assert table.accelerators == ("v100", "p100", "k80")
    assert table.missing == ()
    # (job type, scale factor, accelerator) -> tacc_throughputs.json's "null" entry
    assert table.throughput("LM (batch size 10)", 1)["v100"] == 94.91094148
    assert table.throughput("ResNet-18 (batch size 16)", 1)["k80"] == 4.907044539018749
    assert table.throughput("LM (batch size 20)", 8)["v100"] == 171.34654034
    assert table.throughput("Transformer (batch size 256)", 1)["v100"] == 0.0
    assert table.throughput("Recommendation (batch size 8192)", 1)["p100"] == 13.347526978631343
    assert sum(len(by_acc) for t in table.throughputs.values()
               for by_acc in t.values()) == 249
    assert table.provenance["shockwave_commit"] == "8a44f4a27a45760520386809b695d51b665b3679"


def test_shockwave_data_ships_with_its_licence_and_source_note() -> None:
    folder = resources.files("schedlab").joinpath("data", "shockwave")
    assert "MIT License" in folder.joinpath("LICENSE").read_text(encoding="utf-8")
    note = folder.joinpath("SOURCE.md").read_text(encoding="utf-8")
    assert "8a44f4a27a45760520386809b695d51b665b3679" in note
    assert "scheduler/tacc_throughputs.json" in note
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["package-data"]["schedlab"]
    assert "data/shockwave/*" in package_data


RAW = {
    "v100": {
        "('LM (batch size 10)', 1)": {"null": 94.91094148,
                                      "('LM (batch size 10)', 1)": [40.0, 40.0]},
        "('LM (batch size 10)', 2)": {"null": 109.7866078},
        "('A3C', 1)": {"null": 0.0},
    },
    "k80": {"('LM (batch size 10)', 1)": {"null": 24.737547489916363}},
    "v100_unconsolidated": {"('LM (batch size 10)', 2)": {"null": 50.0}},
}


def test_gavel_format_keeps_job_alone_entries_and_drops_the_rest() -> None:
    doc = document_from_gavel_format(RAW, file="raw.json")
    assert doc["accelerators"] == ["v100", "k80"]
    assert doc["throughputs"] == {
        "A3C": {"1": {"v100": 0.0}},
        "LM (batch size 10)": {"1": {"v100": 94.91094148, "k80": 24.737547489916363},
                               "2": {"v100": 109.7866078}},
    }
    assert [(m["job_type"], m["scale_factor"]) for m in doc["missing"]] == [
        ("LM (batch size 10)", 4), ("LM (batch size 10)", 8)]
    assert "v100_unconsolidated" in doc["provenance"]["dropped"]


def test_throughput_files_in_both_layouts(tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(RAW))
    ours = tmp_path / "ours.json"
    ours.write_text(json.dumps(document_from_gavel_format(RAW, file=str(raw))))
    for path in (raw, ours):
        table = read_throughput_file(path)
        assert table.source == str(path)
        assert table.throughput("LM (batch size 10)", 2) == {"v100": 109.7866078}
        assert resolve_throughputs(str(path)).throughputs == table.throughputs


@pytest.mark.parametrize(("document", "field"), [
    ({"v100": {"('LM (batch size 10)', 1)": {"null": -1.0}}},
     "v100.('LM (batch size 10)', 1).null"),
    ({"v100": {"('LM (batch size 10)', 1)": {"alone": 3.0}}}, "v100.('LM (batch size 10)', 1)"),
    ({"schema": "schedlab/throughput-table@1", "accelerators": ["v100"],
      "throughputs": {"LM (batch size 10)": {"1": {"a100": 3.0}}}},
     "throughputs['LM (batch size 10)'][1].a100"),
    ({"schema": "schedlab/throughput-table@1", "accelerators": ["v100"],
      "throughputs": {"LM (batch size 10)": {"one": {"v100": 3.0}}}},
     "throughputs['LM (batch size 10)']"),
    ({"jobs": []}, "schema"),
])
def test_bad_throughput_file_names_the_file_and_entry(tmp_path: Path, document: dict,
                                                      field: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InputError) as info:
        read_throughput_file(path)
    assert info.value.file == str(path) and info.value.field == field


def test_generator_takes_the_source_by_name_or_table() -> None:
    tacc = load_throughputs("shockwave-tacc")
    by_name = generate_shockwave_instance(20, seed=25, throughputs="shockwave-tacc")
    by_table = generate_shockwave_instance(20, seed=25, table=tacc)
    assert by_name.to_dict() == by_table.to_dict()
    assert "throughputs='shockwave-tacc'" in (by_name.description or "")
    assert "Shockwave's measurements" in (by_name.description or "")
    default = generate_shockwave_instance(20, seed=25)
    assert "throughputs='gavel'" in (default.description or "")
    draws = draw_shockwave_jobs(20, 25)
    for i, job in enumerate(by_name.jobs):
        assert job.job_type is not None
        rate = tacc.throughput(job.job_type, job.scale_factor)["v100"]
        assert job.total_steps == math.floor(draws.duration_s[i] * rate)
    with pytest.raises(InputError) as info:
        generate_shockwave_instance(5, table=tacc, throughputs="gavel")
    assert info.value.field == "throughputs"
    with pytest.raises(UnknownNameError) as info:
        generate_shockwave_instance(5, throughputs="tacc")
    assert info.value.field == "throughputs"
