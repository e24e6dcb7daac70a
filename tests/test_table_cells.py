"""The shared table machinery: statistics by hand, and cached cells reused, not recomputed."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from schedlab.analysis.experiments.kind import TableKind
from schedlab.analysis.experiments.runner import run_cells
from schedlab.analysis.tables.cells import mean_std, ratio

CALLS: list[int] = []


@dataclass(frozen=True)
class Square:
    n: int

    @property
    def file_name(self) -> str:
        return f"square-{self.n}.json"


def run_square(cell: Square) -> int:
    CALLS.append(cell.n)
    return cell.n * cell.n


def read_square(data: dict[str, object]) -> int:
    value = data["square"]
    if not isinstance(value, int):
        raise ValueError("not an integer")
    return value


KIND = TableKind(name="squares", settings=lambda spec: None, plan=lambda settings: [],
                 compute=run_square, dump=lambda value: {"square": value}, load=read_square,
                 key=lambda cell: cell.n, describe=lambda cell: str(cell.n),
                 reduce=lambda settings, results: results, document=lambda table: None,
                 frame=lambda table: None, seeds=lambda settings: [])


def test_mean_std_and_ratio_by_hand() -> None:
    mean, std = mean_std([1.0, 2.0, 6.0])  # mean 3, sample variance (4 + 1 + 9) / 2 = 7
    assert mean == pytest.approx(3.0) and std == pytest.approx(math.sqrt(7.0))
    assert mean_std([5.0]) == (5.0, 0.0)
    assert all(math.isnan(v) for v in mean_std([1.0, math.nan]))
    assert ratio(3.0, 4.0) == 0.75 and math.isnan(ratio(1.0, 0.0))


def test_cached_cells_are_read_back(tmp_path: Path) -> None:
    CALLS.clear()
    cells = [Square(2), Square(3)]
    seen: list[str] = []
    first = run_cells(KIND, cells, tmp_path, on_cell=seen.append)
    assert first == {2: 4, 3: 9} and CALLS == [2, 3] and seen == ["2", "3"]
    assert json.loads((tmp_path / "square-3.json").read_text()) == {"square": 9}
    (tmp_path / "square-3.json").write_text('{"square": "broken"}')  # unreadable: run again
    again = run_cells(KIND, cells, tmp_path, on_cell=seen.append)
    assert again == first and CALLS == [2, 3, 3] and seen[2:] == ["2 (cached)", "3"]
