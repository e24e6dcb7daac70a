"""A sweep on a local Ray instance (2 CPUs) gives the local pool's results, run for run.

Skipped only when ``import ray`` fails.  One Ray start-up (a few seconds) for the module.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from schedlab.cli import main

pytest.importorskip("ray")

CONFIG = {
    "policies": ["fifo", "srtf"],
    "seeds": [0, 1],
    "out": "local",
    "workloads": [
        {"name": "gavel", "kind": "gavel", "jobs": 4, "cluster": "2:2:2", "loads": [20]},
        {"name": "hare", "kind": "hare", "jobs": 4, "cluster": "v100=4,k80=4"},
    ],
    "options": {"format": "csv"},
}


def test_ray_sweep_equals_the_local_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    assert main(["sweep", str(config), "-q"]) == 0
    assert main(["sweep", str(config), "-q", "--backend", "ray", "--workers", "2",
                 "--out", str(tmp_path / "ray")]) == 0
    local_lines, ray_lines = _two_outputs(capsys.readouterr().out)

    local = sorted((tmp_path / "local").iterdir())
    remote = sorted((tmp_path / "ray").iterdir())
    # 2 workloads x 2 policies x 1 load x 2 seeds, the same file names
    assert len(local) == 8
    assert [p.name for p in local] == [p.name for p in remote]
    for a, b in zip(local, remote, strict=True):
        fa, fb = pd.read_csv(a), pd.read_csv(b)
        assert list(fa["job"]) == list(fb["job"])
        np.testing.assert_allclose(fb["jct"].to_numpy(), fa["jct"].to_numpy(), rtol=1e-9,
                                   atol=0.0)
        assert fa["jct"].notna().all()
    assert len(local_lines) == len(ray_lines) == 4


def _two_outputs(text: str) -> tuple[list[str], list[str]]:
    lines = text.strip().splitlines()
    half = len(lines) // 2
    return lines[:half], lines[half:]
