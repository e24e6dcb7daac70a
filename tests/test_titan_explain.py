"""``schedlab titan explain``: the merge rule's verdict on the seed's three cases, by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schedlab.cli import main

CASES = Path(__file__).resolve().parents[1] / "instances" / "titan"


def explain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["titan", "explain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("case", "merges", "benefit"), [
    # beta = (M_A + M_B + min) / (2 M_AB): (20+20+20)/50, (10+20+10)/42, (5+100+5)/204
    (1, True, 60 / 50), (2, False, 40 / 42), (3, False, 110 / 204)])
def test_the_seed_cases(capsys: pytest.CaptureFixture[str], case: int, merges: bool,
                        benefit: float) -> None:
    code, out, _ = explain(capsys, str(CASES / f"case-{case}.json"), "A", "B")
    assert code == 0
    first = out.splitlines()[0]
    assert first.endswith("may merge") if merges else first.endswith("may not merge")
    assert f"merge benefit at 8 GPUs: {benefit:.4f}" in out
    assert ("rejected: benefit" in out) is not merges


def test_another_base_model_is_named(capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    data = json.loads((CASES / "case-1.json").read_text())
    data["jobs"][1]["base_model"] = "roberta-base"
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(data))
    code, out, _ = explain(capsys, str(path), "A", "B")
    assert code == 0 and "may not merge" in out
    assert any(line.startswith("rejected:") and "base model" in line
               for line in out.splitlines())


def test_unknown_task_is_one_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = explain(capsys, str(CASES / "case-1.json"), "A", "nosuch")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "nosuch" in err and "case-1.json" in err
