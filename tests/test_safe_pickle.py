"""The restricted unpickler reads plain data and named stand-ins, and nothing else."""

from __future__ import annotations

import collections
import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest

from schedlab.analysis.safe_pickle import RestrictedPickleError, StandIn, load_restricted


class Pair:
    """A class of 'theirs' (pickled by reference to this module)."""

    def __init__(self, a: int, b: int) -> None:
        self.a, self.b = a, b


def test_plain_data_round_trips(tmp_path: Path) -> None:
    data = {"makespan": 24197.4, "jct_list": [1.5, 2.5], "ordered": collections.OrderedDict(
        [(3, (0.5, 32))]), "ids": {1, 2}, "array": np.arange(4.0), "scalar": np.float64(2.0)}
    path = tmp_path / "plain.pickle"
    path.write_bytes(pickle.dumps(data))
    back = load_restricted(path)
    assert back["jct_list"] == [1.5, 2.5] and back["ordered"][3] == (0.5, 32)
    assert back["ids"] == {1, 2} and float(back["scalar"]) == 2.0
    np.testing.assert_array_equal(back["array"], np.arange(4.0))


def test_their_class_becomes_a_stand_in_that_keeps_its_state(tmp_path: Path) -> None:
    path = tmp_path / "pair.pickle"
    path.write_bytes(pickle.dumps({Pair(1, 2): "x"}))
    with pytest.raises(RestrictedPickleError, match="Pair"):
        load_restricted(path)  # not on the allow-list
    back = load_restricted(path, {f"{__name__}.Pair": "Pair"})
    (key, value), = back.items()
    assert isinstance(key, StandIn) and key.state == {"a": 1, "b": 2} and value == "x"


class Evil:
    """Unpickling this would run a shell command."""

    def __reduce__(self) -> tuple[object, tuple[str, ...]]:
        return (subprocess.call, ("touch pwned",))


def test_a_pickle_that_would_run_code_is_refused(tmp_path: Path, monkeypatch:
                                                 pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"ok": 1, "payload": Evil()}))
    with pytest.raises(RestrictedPickleError, match=r"subprocess\.call") as info:
        load_restricted(path)
    assert str(path) in str(info.value)
    assert not (tmp_path / "pwned").exists()


def test_not_a_pickle_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "text.pickle"
    path.write_text("hello")
    with pytest.raises(RestrictedPickleError, match="not a readable pickle"):
        load_restricted(path)
