"""The goodput simulator (schedlab/simulator/goodput_run.py) against the authors' simulators,
and its checks.

Expected JCTs and restart counts come from running the authors' simulators (Pollux:
petuum/adaptdl ``osdi21-artifact`` at c793c70, ``simulator/simulator.py``; Sia:
siasosp23/artifacts ``sia-simulator/cluster.py``) on the same four jobs (rows cifar10-0,
cifar10-1, ncf-6 and ncf-7 of Pollux's ``workloads/workload-6.csv``) with the same
deterministic policy injected: the k-th active job in submission order gets node k with
min(4, max_replicas) GPUs.  Sia's ran on a 16 x 4 aws cluster (its ``cluster_nnodes`` set so),
on the same aws profiles, which Sia ships byte for byte as Pollux's.  The scripts
(``fixed_policy.py``, ``fixed_sia.py``) are kept outside this repository.
"""

from __future__ import annotations

import pytest

from schedlab.errors import InputError
from schedlab.instance import instance_from_dict
from schedlab.policies.goodput_state import Decision, GoodputState
from schedlab.policies.goodput_static import StaticOnGoodput
from schedlab.policies.pollux import Pollux
from schedlab.simulator.engine import InvalidDecisionError
from schedlab.simulator.goodput_run import placement_of, simulate_goodput, squeeze
from schedlab.workloads.goodput import (
    pollux_workload,
    read_goodput_csv,
    sia_philly_workload,
    specs_from_instance,
)

CLUSTER = {"aws": (16, 4)}


class NodePerJob:
    """Job k (submission order) on node k with min(4, max_replicas) GPUs."""

    name = "node-per-job"

    def decide(self, state: GoodputState) -> Decision:
        return {job.name: ("aws", (k,) * min(4, job.max_replicas["aws"]))
                for k, job in enumerate(state.jobs[:16])}


@pytest.fixture(scope="module")
def four_jobs():  # type: ignore[no-untyped-def]
    specs = pollux_workload(6, jobs=8)
    return [specs[i] for i in (0, 1, 6, 7)]


@pytest.mark.parametrize(("world", "jcts", "restarts"), [
    ("pollux", {"cifar10-0": 1239, "cifar10-1": 1288, "ncf-6": 112, "ncf-7": 120},
     {"cifar10-0": 2, "cifar10-1": 3, "ncf-6": 0, "ncf-7": 0}),
    ("sia", {"cifar10-0": 2190, "cifar10-1": 2209, "ncf-6": 191, "ncf-7": 199},
     {"cifar10-0": 2, "cifar10-1": 2, "ncf-6": 2, "ncf-7": 2}),
])
def test_job_model_matches_the_authors_simulators(four_jobs, world, jcts, restarts):  # type: ignore[no-untyped-def]
    run = simulate_goodput(four_jobs, CLUSTER, NodePerJob(), world=world)
    assert run.jcts == pytest.approx(jcts, abs=0)
    assert {r.job: r.migrations for r in run.result.jobs} == restarts
    # every job holds its GPUs from the round after its arrival: no GPU is ever over-used
    assert max(run.held_gpus) <= 64


def test_a_job_first_runs_in_the_round_after_it_arrives(four_jobs):  # type: ignore[no-untyped-def]
    run = simulate_goodput(four_jobs[:1], CLUSTER, NodePerJob(), world="pollux",
                           keep_log=True)
    # cifar10-0 arrives at 53 s: the first round (0-60 s) runs nothing, it starts at 60 s
    assert run.log[0]["timestamp"] == 60
    assert run.result.jobs[0].start == 60
    assert run.held_gpus[0] == 1


def test_invalid_decisions_are_refused(four_jobs):  # type: ignore[no-untyped-def]
    class TooMany:
        name = "too-many"

        def decide(self, state: GoodputState) -> Decision:
            return {job.name: ("aws", (0,) * 5) for job in state.jobs}

    with pytest.raises(InvalidDecisionError, match="node 0 of aws holds 5 GPUs of 4"):
        simulate_goodput(four_jobs[:1], CLUSTER, TooMany())


def test_pollux_is_repeatable_with_a_seed_and_finishes_every_job(four_jobs):  # type: ignore[no-untyped-def]
    runs = [simulate_goodput(four_jobs[2:], CLUSTER,
                             Pollux(seed=3, pop_size=10, generations=5)) for _ in range(2)]
    assert runs[0].jcts == runs[1].jcts
    assert len(runs[0].jcts) == 2
    assert runs[0].result.solves > 0


def test_fixed_gang_baselines_hold_exactly_their_request(four_jobs):  # type: ignore[no-untyped-def]
    run = simulate_goodput(four_jobs, CLUSTER, StaticOnGoodput("fifo"), keep_log=True)
    assert len(run.jcts) == 4
    requested = {s.name: s.num_replicas for s in four_jobs}
    for row in run.log:
        for job in row["jobs"]:
            if job["allocation"]:
                assert len(job["allocation"]) == requested[job["name"]]


def test_placements_group_runs_of_node_ids_and_sia_squeezes_them() -> None:
    assert placement_of([3, 3, 0, 0, 0, 5]) == (2, 3, 1)
    assert placement_of([]) == ()
    # Sia's repair (cluster.py 198-209): 7 GPUs over 4 nodes, at most 3 nodes -> 3, 3, 1
    assert squeeze((2, 2, 2, 1), 3) == (3, 3, 1)
    assert squeeze((4, 4), 3) == (4, 4)


def test_bad_goodput_jobs_are_one_error_naming_the_field() -> None:
    base = {"cluster": {"accelerators": {"aws": {"count": 4, "nodes": 1, "gpus_per_node": 4}}}}
    unknown = instance_from_dict({**base, "jobs": [{"id": "a", "application": "gpt5"}]})
    with pytest.raises(InputError, match=r"jobs\[0\]\.application: unknown application"):
        specs_from_instance(unknown, file="x.json")
    too_big = instance_from_dict({**base, "jobs": [
        {"id": "a", "application": "cifar10", "batch_size": 8192}]})
    with pytest.raises(InputError, match=r"jobs\[0\]\.batch_size: batch size 8192 is outside "
                       r"the profile of cifar10 \(128 to 4096"):
        specs_from_instance(too_big, file="x.json")
    text = "name,time,application,num_replicas,batch_size\na,0,cifar10,1,128\nb,x,cifar10,1,1\n"
    with pytest.raises(InputError, match=r"t\.csv: row 3\.time: not a number: 'x'"):
        read_goodput_csv(text, file="t.csv")
    zero = "name,time,application,num_replicas,batch_size\na,0,cifar10,0,128\n"
    with pytest.raises(InputError, match=r"t\.csv: row 2\.num_replicas: must be >= 1, got '0'"):
        read_goodput_csv(zero, file="t.csv")


def test_sia_philly_recipe_replaces_ncf_by_cifar10() -> None:
    pollux, sia = pollux_workload(6), sia_philly_workload(6)
    assert len(pollux) == len(sia) == 160
    assert [s.submission_time for s in pollux] == [s.submission_time for s in sia]
    assert not any(s.application == "ncf" for s in sia)
    changed = [(p.name, s.name) for p, s in zip(pollux, sia, strict=True) if p != s]
    assert changed and all(p.startswith("ncf-") and s.startswith("cifar10-")
                           for p, s in changed)


@pytest.mark.parametrize("name", ["sia", "pollux"])
def test_the_kit_checks_goodput_policies(name: str) -> None:
    from schedlab.testing import check_policy

    small = {"pop_size": 10, "generations": 3} if name == "pollux" else {}
    report = check_policy(name, max_rounds=3, policy_options=small)
    assert report.passed[:2] == ["valid", "deterministic"]
    assert ("failed_solves" in report.passed) == (name == "sia")


def test_the_goodput_command_prints_every_policy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import csv

    from schedlab.cli import main

    out = tmp_path / "jobs.csv"
    assert main(["goodput", "pollux:6", "--jobs", "2", "--policies", "fifo,srtf",
                 "--out", str(out), "-q"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert sorted((r["policy"], r["job"]) for r in rows) == [
        ("fifo", "cifar10-0"), ("fifo", "cifar10-1"), ("srtf", "cifar10-0"),
        ("srtf", "cifar10-1")]
    assert all(float(r["jct_s"]) > 0 for r in rows)
    assert main(["goodput", "pollux:9", "-q"]) == 2


def test_simulate_points_a_goodput_instance_to_the_goodput_command(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from schedlab.cli import main
    from schedlab.instance import save_instance
    from schedlab.workloads.goodput import goodput_instance

    path = tmp_path / "gp.json"
    save_instance(goodput_instance(pollux_workload(6, jobs=2), {"aws": (1, 4)}, name="gp"),
                  path)
    assert main(["simulate", "--workload", str(path), "--policy", "fifo", "-q"]) == 2
    assert main(["goodput", str(path), "--policies", "fifo", "-q"]) == 2  # 6-GPU requests
    assert main(["goodput", str(path), "--policies", "fifo", "--cluster", "aws=2x4",
                 "-q"]) == 0
