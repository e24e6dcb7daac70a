"""The shared table output (schedlab.analysis.tables.output): escaping, rendering, manifest."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from schedlab.analysis.tables import output
from schedlab.analysis.tables.output import Block, Document, Heading

MANIFEST_FIELDS = {"format", "table", "schedlab_version", "python", "python_implementation",
                   "libraries", "seeds", "settings", "experiment", "command", "machine", "started",
                   "finished", "code_digest", "files"}


@pytest.mark.parametrize(("text", "expected"), [
    ("50%", r"50\%"),
    ("avg_jct_s", r"avg\_jct\_s"),
    ("A & B", r"A \& B"),
    ("#3", r"\#3"),
    ("1.20 ± 0.03", r"1.20 $\pm$ 0.03"),
    ("worst ρ", r"worst $\rho$"),
    ("$5 {x}", r"\$5 \{x\}"),
    ("a\\b", r"a\textbackslash{}b"),
    ("~^", r"\textasciitilde{}\textasciicircum{}"),
    ("plain text 1.5", "plain text 1.5"),
])
def test_latex_escape(text: str, expected: str) -> None:
    assert output.latex_escape(text) == expected


def test_pm_cells() -> None:
    assert output.pm(1.234, 0.05, ".2f", seeds=3) == "1.23 ± 0.05"
    assert output.pm(7200.0, 360.0, ".1f", scale=1 / 3600, seeds=2) == "2.0 ± 0.1"
    assert output.pm(1.234, 0.0, ".2f", seeds=1) == "1.23"
    assert output.pm(math.nan, math.nan, ".2f", seeds=3) == "-"
    assert output.mean_std_columns("jct", 2.0, 0.5) == {"jct_mean": 2.0, "jct_std": 0.5}


def _document() -> Document:
    return Document(title="T_1: 5% off", parts=[
        "Ran: a & b.",
        Heading("Part #1"),
        Block(header=["policy", "avg JCT (h)"], rows=[["a_b", "1.00 ± 0.10"], ["c|d", "-"]]),
    ])


def test_markdown_and_latex_of_one_document() -> None:
    document = _document()
    assert output.render_markdown(document) == (
        "# T_1: 5% off\n\nRan: a & b.\n\n## Part #1\n\n"
        "| policy | avg JCT (h) |\n|---|---:|\n| a_b | 1.00 ± 0.10 |\n| c\\|d | - |\n")
    assert output.render_latex(document) == (
        "% T_1: 5% off\n% Ran: a & b.\n%\n% Part #1\n\n"
        "\\begin{tabular}{lr}\n\\toprule\npolicy & avg JCT (h) \\\\\n\\midrule\n"
        "a\\_b & 1.00 $\\pm$ 0.10 \\\\\nc|d & - \\\\\n\\bottomrule\n\\end{tabular}\n")


def test_block_rejects_a_ragged_row() -> None:
    with pytest.raises(ValueError, match="cells"):
        Block(header=["a", "b"], rows=[["1"]])
    with pytest.raises(ValueError, match="align"):
        Block(header=["a", "b"], rows=[], align="lx")


def test_files_and_manifest(tmp_path: Path) -> None:
    frame = pd.DataFrame({"policy": ["a", "b"], "jct_mean": [1.5, 2.0], "jct_std": [0.1, 0.0]})
    written = output.write_table_files(tmp_path / "out", "demo", _document(), frame)
    assert [p.name for p in written] == ["demo.md", "demo.csv", "demo.tex"]
    extra = tmp_path / "out" / "demo.png"
    extra.write_bytes(b"\x89PNG not really")
    started = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    path = output.write_manifest(tmp_path / "out", "demo", [*written, extra], seeds=(25, 26),
                                 settings={"jobs": 12, "seeds": (25, 26)},
                                 command=["schedlab", "tables", "demo"], started=started)
    assert path.name == "demo.manifest.json"
    data = json.loads(path.read_text())
    assert set(data) == MANIFEST_FIELDS
    assert data["seeds"] == [25, 26]
    assert data["command"] == ["schedlab", "tables", "demo"]
    assert data["settings"] == {"jobs": 12, "seeds": [25, 26]}
    assert data["started"] == "2026-01-02T03:04:05+00:00"
    assert data["finished"] >= data["started"]
    assert set(data["libraries"]) == set(output.LIBRARIES)
    import numpy
    assert data["libraries"]["numpy"] == numpy.__version__
    assert set(data["machine"]) == {"platform", "machine", "processor", "cpu_count",
                                    "hostname", "memory_bytes"}
    assert data["machine"]["memory_bytes"] is None or data["machine"]["memory_bytes"] > 0
    assert len(data["code_digest"]) == 64
    assert [f["name"] for f in data["files"]] == ["demo.md", "demo.csv", "demo.tex", "demo.png"]
    for entry in data["files"]:
        content = (tmp_path / "out" / entry["name"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(content).hexdigest()
        assert entry["bytes"] == len(content)
    assert pd.read_csv(tmp_path / "out" / "demo.csv")["jct_mean"].tolist() == [1.5, 2.0]
