"""Acceptance: measured throughputs -> Instance -> ``schedlab solve`` (Gavel max-min fairness,
rounds) -> ``schedlab replay --time-scale`` on real zoo jobs; the realized JCTs are within
20% (median over jobs) of the simulator's prediction for the same plan.

Throughputs are measured in the test, under the replay's own conditions: a calibration plan
runs each job type on both CPU workers at once for one wall second (steps / (1 s - switch)),
through the same executor.  Measuring one job alone (as a profiler does) over-predicts a
replay on a shared 2-core machine, where both workers and everything else compete for the
cores (docs/executor.md has the numbers).  20% is the tolerance the issue sets for noisy CI
machines; the goal, and what a quiet machine gives, is under 5%.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from schedlab.cli import main
from schedlab.executor.run import run_replay

log = logging.getLogger(__name__)

TYPES = ["lstm/tiny@16", "lstm/tiny@64", "recommender/tiny@64", "recommender/tiny@256"]
SCALE = 30.0  # an instance second lasts 1/30 wall second; a 30 s round lasts 1 s
ROUND_S = 30.0
WORK_WALL_S = 2.5  # each job needs about this many wall seconds of training


def _calibrate(tmp: Path, seconds: float = 1.0) -> dict[str, float]:
    """Steps per wall second of each type with both workers busy (see the module doc)."""
    jobs, rounds = [], []
    for k, name in enumerate(TYPES):
        pair = []
        for slot in range(2):
            jobs.append({"id": f"c{k}-{slot}", "job_type": name, "total_steps": 1e9,
                         "throughput": {"cpu": 1.0}})
            pair.append({"job": f"c{k}-{slot}", "accelerator": "cpu", "gpus": 1,
                         "gpu_ids": [slot]})
        rounds.append(pair)
    (tmp / "cal-instance.json").write_text(json.dumps({
        "schema": "schedlab/instance@1", "cluster": {"accelerators": {"cpu": {"count": 2}}},
        "jobs": jobs, "params": {"round_s": seconds}}))
    (tmp / "cal-solution.json").write_text(json.dumps({
        "schema": "schedlab/solution@1", "instance": {"name": "cal", "hash": ""},
        "formulation": "manual", "status": "feasible", "rounds": rounds}))
    report = run_replay(tmp / "cal-solution.json", tmp / "cal-instance.json",
                        workdir=tmp / "cal", checkpoint_every_s=0)
    rates: dict[str, list[float]] = {}
    for record in report.segments:
        ran = seconds - (record["switch_s"] or 0.0)
        rates.setdefault(TYPES[record["round"]], []).append(record["steps_after"] / ran)
    return {name: sum(r) / len(r) for name, r in rates.items()}


def test_replay_matches_prediction_within_20_percent(tmp_path: Path) -> None:
    throughput = _calibrate(tmp_path)
    log.info("calibrated steps/s: %s", throughput)
    instance = {"schema": "schedlab/instance@1",
                "cluster": {"accelerators": {"cpu": {"count": 2}}},
                "jobs": [{"id": f"j{i}", "job_type": name,
                          "total_steps": round(throughput[name] * WORK_WALL_S),
                          "throughput": {"cpu": throughput[name]}}
                         for i, name in enumerate(TYPES)],
                "params": {"round_s": ROUND_S, "num_rounds": 12}}
    (tmp_path / "instance.json").write_text(json.dumps(instance))
    assert main(["solve", str(tmp_path / "instance.json"), "-f", "gavel.max_min_fairness",
                 "--out", str(tmp_path / "solution.json"), "-q"]) == 0
    assert main(["replay", str(tmp_path / "solution.json"), "--instance",
                 str(tmp_path / "instance.json"), "--time-scale", str(SCALE),
                 "--workdir", str(tmp_path / "work"), "--out", str(tmp_path / "report.json"),
                 "-q"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    for job in report["jobs"]:
        log.info("%s %s: predicted %.1f s, realized %s s, error %s", job["job"],
                 job["job_type"], job["predicted_jct_s"], job["realized_jct_s"],
                 job["relative_error"])
    summary = report["summary"]
    log.info("median |error| %.3f, max %.3f", summary["median_abs_error"] or -1,
             summary["max_abs_error"] or -1)
    assert summary["predicted_finished"] == 4
    assert summary["compared"] >= 3  # a job may miss the plan's end on a loaded machine
    assert summary["median_abs_error"] <= 0.20
