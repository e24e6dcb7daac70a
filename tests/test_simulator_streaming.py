"""Production-size runs: streaming records and running sums change no result, and the engine
forgets finished jobs.

The reference is the run that keeps everything (``keep_rounds=True``, ``keep_jobs=True``):
its per-job records, and busy GPU-seconds recomputed here from its per-round records (sum
over GPUs of last release - round start, a co-located pair's GPUs once).  A streaming run
(no round records, job records only through ``on_job_done``) must give the same records
(rel 1e-9) and its running busy sums must equal that recomputation.
"""

from __future__ import annotations

import csv
import gc
import math
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.instance import Cluster, load_instance
from schedlab.placement import mask_ids
from schedlab.policies.base import Policy
from schedlab.policies.registry import get_policy
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.simulator import JobRecord, SimulationResult, simulate
from schedlab.simulator.result import job_columns
from schedlab.simulator.stream import RecordChunks
from schedlab.workloads.shockwave import generate_shockwave_instance

ROOT = Path(__file__).resolve().parent.parent
NUMERIC = ("arrival", "start", "finish", "total_steps", "steps", "gpu_seconds", "executed_s",
           "overhead_s", "isolated_time_s")


def pools(**counts: int) -> Cluster:
    return Cluster.model_validate({"accelerators": {k: {"count": n} for k, n in counts.items()}})


def busy_from_rounds(result: SimulationResult) -> dict[str, float]:
    """Busy GPU-seconds per type from the per-round records, computed independently."""
    out = dict.fromkeys(result.gpus, 0.0)
    for r in result.rounds:
        last: dict[tuple[str, int], float] = {}
        for run in r.runs:
            for gpu in mask_ids(run.gpu_mask):
                key = (run.accelerator, gpu)
                last[key] = max(last.get(key, r.start), run.end)
        for (acc, _), end in last.items():
            out[acc] += end - r.start
    return out


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def assert_same_records(left: list[JobRecord], right: list[JobRecord]) -> None:
    assert [r.job for r in left] == [r.job for r in right]
    for a, b in zip(left, right, strict=True):
        for name in NUMERIC:
            assert close(getattr(a, name), getattr(b, name)), (a.job, name)
        assert (a.preemptions, a.migrations, a.rounds_run) == (b.preemptions, b.migrations,
                                                                b.rounds_run)
        assert a.time_on.keys() == b.time_on.keys()
        assert all(close(a.time_on[k], b.time_on[k]) for k in a.time_on)


def check_streaming_equals_reference(jobs: object, policy_name: str, **kw: object) -> None:
    """The full run vs the streaming run of the same workload and policy."""
    full = simulate(jobs, policy=get_policy(policy_name), **kw)  # type: ignore[arg-type]
    streamed: list[JobRecord] = []
    lean = simulate(jobs, policy=get_policy(policy_name), keep_rounds=False,  # type: ignore
                    keep_jobs=False, on_job_done=streamed.append, **kw)
    assert lean.rounds == [] and full.rounds
    by_arrival = {r.job: i for i, r in enumerate(full.jobs)}
    finished = sorted(streamed, key=lambda r: by_arrival[r.job])
    assert_same_records([r for r in full.jobs if r.finish is not None], finished)
    assert_same_records([r for r in full.jobs if r.finish is None], lean.jobs)
    assert lean.round_count == len(full.rounds)
    assert lean.job_rounds == sum(len(r.runs) for r in full.rounds)
    reference = busy_from_rounds(full)
    for result in (full, lean):
        busy = result.busy_gpu_seconds()
        assert busy.keys() == reference.keys()
        assert all(close(busy[k], reference[k]) for k in busy)


@st.composite
def workloads(draw: st.DrawFn) -> list[JobState]:
    """2-12 jobs on v100/k80 pools of 4: random arrivals, gangs, speeds, switch overheads."""
    n = draw(st.integers(2, 12))
    jobs = []
    for i in range(n):
        scale = draw(st.sampled_from([1, 1, 2, 4]))
        v100 = draw(st.floats(0.5, 5.0))
        k80 = draw(st.one_of(st.just(0.0), st.floats(0.1, 2.0)))
        jobs.append(JobState(
            id=f"j{i}", arrival=draw(st.floats(0.0, 3000.0)), scale_factor=scale,
            total_steps=draw(st.floats(50.0, 5000.0)), throughput={"v100": v100, "k80": k80},
            switch_overhead_s=draw(st.sampled_from([0.0, 0.0, 30.0]))))
    return jobs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), policy=st.sampled_from(["fifo", "srtf", "gavel.max_min_fairness",
                                                 "tiresias"]),
       round_s=st.sampled_from([60.0, 360.0]))
def test_streaming_run_equals_the_full_run_on_random_workloads(
        jobs: list[JobState], policy: str, round_s: float) -> None:
    check_streaming_equals_reference(jobs, policy, cluster=pools(v100=4, k80=4),
                                     round_s=round_s)


def test_streaming_equals_full_with_co_located_pairs() -> None:
    """Space sharing: a pair's GPUs count once in the running busy sums."""
    instance = load_instance(ROOT / "instances" / "gavel" / "colocation-24jobs.json")
    full = simulate(instance, policy=get_policy("gavel.max_min_fairness_packed"))
    assert any(run.partner is not None for r in full.rounds for run in r.runs)
    check_streaming_equals_reference(instance, "gavel.max_min_fairness_packed")


def test_streaming_equals_full_on_dynamic_jobs_and_gavel_mechanism() -> None:
    """Shockwave-style jobs (epochs, batch-size changes) and Gavel's step accounting."""
    dynamic = generate_shockwave_instance(10, {"v100": 8}, seed=3, mean_gap_s=600.0)
    check_streaming_equals_reference(dynamic, "fifo")
    gen = [JobState(id=f"g{i}", arrival=200.0 * i, scale_factor=1 + i % 2,
                    total_steps=3000.0 + 700.0 * i, throughput={"v100": 2.0, "k80": 0.7})
           for i in range(8)]
    check_streaming_equals_reference(gen, "srtf", cluster=pools(v100=2, k80=2),
                                     mechanism="gavel")


@pytest.fixture(autouse=True)
def frozen_heap() -> Iterator[None]:
    """Freeze the objects alive before each test out of the collector (``gc.freeze``): the
    Watcher's ``gc.collect()`` at every decision then scans only what the test made, not the
    whole test session's heap (30 s per test late in a full run, under a second alone).
    What a test makes is never frozen, so the weak-reference checks are unchanged."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


class Watcher(Policy):
    """Runs every active job on v100 when it fits (arrival order) and keeps a weak reference
    to every JobState it is shown; it never reads ``state.finished``."""

    uses_finished_jobs = False

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[str, weakref.ref[JobState]] = {}
        self.gone_checked = 0
        self.alive_after_finish = 0

    def decide(self, state: ClusterState) -> list[Assignment]:
        gc.collect()
        active = {j.id for j in state.active}
        for job_id, ref in self.refs.items():
            if job_id not in active:  # finished in an earlier round
                self.gone_checked += 1
                self.alive_after_finish += ref() is not None
        for j in state.active:
            self.refs.setdefault(j.id, weakref.ref(j))
        free = state.gpus["v100"]
        out = []
        for j in state.active:
            if j.scale_factor <= free:
                out.append(Assignment(j.id, "v100"))
                free -= j.scale_factor
        return out


class TrackedJob(JobState):
    """A JobState a weak reference can point to (the simulator's copies keep the class)."""


def staggered(n: int) -> list[JobState]:
    return [TrackedJob(id=f"w{i}", arrival=100.0 * i, scale_factor=1, total_steps=600.0,
                     throughput={"v100": 1.0}) for i in range(n)]


@pytest.mark.parametrize("engine", ["reference", "arrays"])
def test_streaming_engine_holds_no_finished_job(engine: str) -> None:
    """keep_jobs=False: once a job's record went out, nothing in the engine (either loop)
    keeps its JobState alive (its weak reference is dead at the next decision); with the
    default keep_jobs=True the same check finds them alive, so the check can fail."""
    seen: list[JobRecord] = []
    watcher = Watcher()
    result = simulate(staggered(40), cluster=pools(v100=2), policy=watcher, round_s=360.0,
                      keep_rounds=False, keep_jobs=False, on_job_done=seen.append,
                      engine=engine)  # type: ignore[arg-type]
    assert len(seen) == 40 and result.jobs == []
    assert watcher.gone_checked > 100 and watcher.alive_after_finish == 0
    keeper = Watcher()
    simulate(staggered(40), cluster=pools(v100=2), policy=keeper, round_s=360.0,
             engine=engine)  # type: ignore[arg-type]
    assert keeper.alive_after_finish == keeper.gone_checked > 100


class StopAfter(Watcher):
    """Interrupts the run (as Ctrl-C would) at decision ``rounds``."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.rounds = rounds

    def decide(self, state: ClusterState) -> list[Assignment]:
        if state.round_index == self.rounds:
            raise KeyboardInterrupt
        return super().decide(state)


def test_record_chunks_keep_finished_jobs_on_interrupt(tmp_path: Path) -> None:
    """Records streamed in chunks of 3: after an interrupt at round 9 and a flush, the file
    holds exactly the jobs a run stopped by max_rounds=9 finished, with the same values as
    its per-job table."""
    path = tmp_path / "jobs.csv"
    chunks = RecordChunks(path, ["v100"], {"policy": "watcher", "seed": 0}, chunk=3)
    with pytest.raises(KeyboardInterrupt):
        simulate(staggered(20), cluster=pools(v100=2), policy=StopAfter(9), round_s=360.0,
                 keep_rounds=False, keep_jobs=False, on_job_done=chunks.add)
    chunks.flush()
    stopped = simulate(staggered(20), cluster=pools(v100=2), policy=Watcher(), round_s=360.0,
                       max_rounds=9)
    expected = stopped.to_dataframe()
    expected = expected[expected["finish"].notna()]
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["policy", "seed", *job_columns(["v100"])]
    assert chunks.written == len(rows) == len(expected) > 0
    for row, (_, want) in zip(sorted(rows, key=lambda r: float(r["finish"])),
                              expected.sort_values("finish").iterrows(), strict=True):
        assert row["job"] == want["job"] and row["policy"] == "watcher"
        for name in ("arrival", "start", "finish", "jct", "gpu_seconds", "time_on_v100"):
            assert math.isclose(float(row[name]), float(want[name]), rel_tol=1e-9)


def test_cli_single_run_quiet_prints_only_the_result_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """One run from the CLI with --quiet: stdout is the result line, no progress display, the
    chunk file is gone and --out holds one row per job with the finished count the line's
    run reports."""
    from schedlab.cli import main

    out = tmp_path / "jobs.csv"
    code = main(["simulate", "--policy", "fifo", "--jobs", "12", "--jobs-per-hour", "30",
                 "--out", str(out), "--quiet"])
    captured = capsys.readouterr()
    assert code == 0
    assert "job-rounds/s" not in captured.err  # no progress display
    lines = captured.out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fifo jobs_per_hour=30 seeds=1 avg_jct_h=")
    assert not (tmp_path / "jobs.csv.partial.csv").exists()
    with out.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12 and all(row["finish"] != "" for row in rows)
